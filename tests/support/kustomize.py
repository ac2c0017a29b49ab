"""A small renderer for the parts of kustomize that deploy/k8s uses, for tests on machines without it.

It reads kustomization.yaml's ``resources`` (files, or directories holding their own
kustomization.yaml), applies ``labels`` (to metadata.labels, kustomize's default) and ``images``
(newName, newTag, digest), and refuses any other field, so a kustomization that grows beyond it
fails loudly here instead of being rendered wrong. tests/test_deploy.py compares its output with
kustomize's own wherever kustomize (or kubectl) is installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

SUPPORTED_FIELDS = {"apiVersion", "kind", "resources", "labels", "images"}
SUPPORTED_LABEL_FIELDS = {"pairs", "includeSelectors", "includeTemplates"}
SUPPORTED_IMAGE_FIELDS = {"name", "newName", "newTag", "digest"}


class UnsupportedKustomization(ValueError):
    pass


def load_kustomization(directory: Path) -> dict[str, Any]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - SUPPORTED_FIELDS
    if unknown:
        raise UnsupportedKustomization(
            f"{directory}/kustomization.yaml uses {sorted(unknown)}, which tests/support/kustomize.py "
            "does not implement: extend it (and its comparison with kustomize) or install kustomize"
        )
    return kustomization


def render(directory: Path, kustomization: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The objects ``kustomize build directory`` would print, in resource order."""
    if kustomization is None:
        kustomization = load_kustomization(directory)
    objects: list[dict[str, Any]] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        if path.is_dir():
            objects.extend(render(path))
        else:
            objects.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    for label_set in kustomization.get("labels", []):
        apply_labels(objects, label_set)
    for image in kustomization.get("images", []):
        apply_image(objects, image)
    return objects


def apply_labels(objects: list[dict[str, Any]], label_set: dict[str, Any]) -> None:
    unknown = set(label_set) - SUPPORTED_LABEL_FIELDS
    if unknown or label_set.get("includeSelectors") or label_set.get("includeTemplates"):
        raise UnsupportedKustomization(f"labels entry {label_set} is beyond tests/support/kustomize.py")
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("labels", {}).update(label_set.get("pairs", {}))


def split_image(reference: str) -> tuple[str, str | None, str | None]:
    """``name[:tag][@digest]`` into its parts (a registry port's colon is not a tag)."""
    rest, _, digest = reference.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1 :], digest or None
    return rest, None, digest or None


def apply_image(objects: list[dict[str, Any]], image: dict[str, Any]) -> None:
    unknown = set(image) - SUPPORTED_IMAGE_FIELDS
    if unknown:
        raise UnsupportedKustomization(f"images entry {image} uses {sorted(unknown)}")
    for container in containers(objects):
        name, tag, digest = split_image(container["image"])
        if name != image["name"]:
            continue
        name = image.get("newName", name)
        tag = image.get("newTag", tag)
        digest = image.get("digest", digest)
        reference = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
        container["image"] = reference


def containers(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every container and init container, wherever a pod spec sits in an object."""

    def walk(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("containers", "initContainers") and isinstance(value, list):
                    yield from (c for c in value if isinstance(c, dict) and "image" in c)
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    for obj in objects:
        yield from walk(obj)
