"""What a sighted reader of the rendered page cannot see, judged by the browser's computed style and
layout, run in the page once it settled (``READ_DOM``).

Stylesheets hide text in many ways besides ``display: none``; each is the classic carrier of an
instruction aimed at a model that the person reviewing the page never sees. Dropped, and their
characters (whitespace collapsed) counted as ``hidden_removed``, as the static reader counts its own:

- elements: ``display: none``; an opacity near 0; a ``clip`` or ``clip-path`` that leaves no area
  (``rect(0 0 0 0)``, ``inset(50%)``, ``circle(0)``, a flat polygon); a transform that collapses
  them (``scale(0)``); a zero width or height that clips its overflow;
- text: a computed visibility other than ``visible``; a font under 3 px; a transparent colour, or
  one within 1.1:1 of the background it sits on (when that background is known: a colour on the
  element or an unpositioned ancestor, no image); laid out with no area; wholly off the page
  (left of or above its origin, or past its scrollable end); wholly outside an ancestor that
  clips its overflow (``hidden`` or ``clip``: a scrolling container's text is reachable and kept).

Kept: small but readable fonts, light text on a dark background, sticky and fixed headers, text
scrolled out of view inside a scrolling container, closed ``<details>`` (a click shows it), form
controls' text. Judgements are made before anything is removed, so a removal cannot move another;
the removals are made in a copy of the document, which is what is serialized (the page itself is
left as it is, for the screenshot taken at the same time).
"""

from __future__ import annotations

READ_DOM = """
(cap) => {
  const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "TITLE", "META", "LINK", "BASE"]);
  const controls = new Set(["TEXTAREA", "SELECT", "OPTION", "OPTGROUP", "DATALIST"]);
  const root = document.documentElement;
  const pageW = Math.max(root.scrollWidth, innerWidth);
  const pageH = Math.max(root.scrollHeight, innerHeight);
  const rtl = getComputedStyle(root).direction === "rtl"
    || (document.body !== null && getComputedStyle(document.body).direction === "rtl");
  const styles = new Map();
  const style = (e) => {
    let s = styles.get(e);
    if (!s) { s = getComputedStyle(e); styles.set(e, s); }
    return s;
  };
  const chars = (s) => s.replace(/\\s+/g, "").length;
  const numbers = (s) => (s.match(/-?[\\d.]+(?:e-?\\d+)?(?:px|%)?/g) || []);
  const length = (token, whole) => token.endsWith("%") ? parseFloat(token) * whole / 100 : parseFloat(token);

  // A clip-path with no area left: inset(50%), circle(0), ellipse(0 0), a flat polygon.
  const clippedAway = (value, box) => {
    if (!value || value === "none") return false;
    const shape = value.trim();
    const args = shape.slice(shape.indexOf("(") + 1, shape.lastIndexOf(")")).split(" round ")[0];
    if (shape.startsWith("inset(")) {
      const v = numbers(args);
      if (v.length === 0) return false;
      const [t, r = t, b = t, l = r] = v;
      return length(t, box.height) + length(b, box.height) >= box.height - 0.5
        || length(l, box.width) + length(r, box.width) >= box.width - 0.5;
    }
    if (shape.startsWith("circle(") || shape.startsWith("ellipse(")) {
      const radii = args.split(" at ")[0].trim();
      if (radii === "" || /closest|farthest/.test(radii)) return false;
      return numbers(radii).some((token) => parseFloat(token) <= 0);
    }
    if (shape.startsWith("polygon(")) {
      const points = args.replace(/^\\s*(nonzero|evenodd)\\s*,/, "").split(",").map((p) => numbers(p));
      if (points.length < 3 || points.some((p) => p.length !== 2)) return points.length < 3;
      let area = 0;
      points.forEach((p, i) => {
        const q = points[(i + 1) % points.length];
        const [px, py] = [length(p[0], box.width), length(p[1], box.height)];
        area += px * length(q[1], box.height) - length(q[0], box.width) * py;
      });
      return Math.abs(area) / 2 < 1;
    }
    return false;
  };
  // The old clip property: rect(top, right, bottom, left) on a positioned element.
  const rectClipped = (s) => {
    if (!s.clip || !s.clip.startsWith("rect(") || !["absolute", "fixed"].includes(s.position)) return false;
    const v = s.clip.slice(5, -1).split(/[ ,]+/);
    if (v.length !== 4 || v.includes("auto")) return false;
    const [t, r, b, l] = v.map(parseFloat);
    return r - l <= 1 || b - t <= 1;
  };
  const collapsed = (transform) => {
    const m = transform.match(/^matrix(3d)?\\(([^)]*)\\)/);
    if (!m) return false;
    const v = m[2].split(",").map(parseFloat);
    const [a, b, c, d] = m[1] ? [v[0], v[1], v[4], v[5]] : v;
    return Math.abs(a * d - b * c) < 1e-6;
  };
  const clips = (value) => value === "hidden" || value === "clip";
  // An element a reader cannot see at all, with everything in it.
  const erased = (e, s) => {
    if (parseFloat(s.opacity) < 0.05 || rectClipped(s) || collapsed(s.transform)) return true;
    if (s.clipPath !== "none" || clips(s.overflowX) || clips(s.overflowY)) {
      const box = e.getBoundingClientRect();
      if (clippedAway(s.clipPath, box)) return true;
      if ((clips(s.overflowX) && box.width < 0.5) || (clips(s.overflowY) && box.height < 0.5)) return true;
    }
    return false;
  };

  const rgba = (value) => {
    const m = value.match(/^rgba?\\(([^)]*)\\)$/);
    if (!m) return null;
    const v = m[1].split(/[ ,\\/]+/).filter(Boolean).map(parseFloat);
    return v.length >= 3 ? [v[0], v[1], v[2], v.length > 3 ? v[3] : 1] : null;
  };
  const luminance = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  // The colour the text is drawn on, when it can be known; null when not (an image, a positioned
  // box that may sit over something else, a translucent layer).
  const backdrop = (e) => {
    for (let at = e; at; at = at.parentElement) {
      const s = style(at);
      if (s.backgroundImage !== "none") return null;
      const bg = rgba(s.backgroundColor);
      if (bg === null) return null;
      if (bg[3] >= 0.95) return bg;
      if (bg[3] > 0.05) return null;
      if ((s.position === "absolute" || s.position === "fixed") && at !== root) return null;
    }
    return [255, 255, 255, 1];  // the canvas
  };
  const camouflaged = (e, s) => {
    const fg = rgba(s.color);
    if (fg === null) return false;
    if (fg[3] < 0.05) return true;
    if (s.textShadow !== "none" || parseFloat(s.webkitTextStrokeWidth || "0") > 0) return false;
    const bg = backdrop(e);
    if (bg === null) return false;
    const mixed = fg.slice(0, 3).map((c, i) => c * fg[3] + bg[i] * (1 - fg[3]));
    const [hi, lo] = [luminance(mixed), luminance(bg)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05) < 1.1;
  };
  const offPage = (r) =>
    r.bottom + scrollY <= 0 || r.top + scrollY >= pageH || r.left + scrollX >= pageW
    || (!rtl && r.right + scrollX <= 0);
  const outside = (r, box, s) =>
    (clips(s.overflowX) && (r.right <= box.left || r.left >= box.right))
    || (clips(s.overflowY) && (r.bottom <= box.top || r.top >= box.bottom));
  // Text whose every box lies outside an ancestor that clips it (fixed and absolute boxes escape
  // the ancestors that are not their containing block).
  const clippedOut = (parent, rects) => {
    let needPositioned = false;
    for (let at = parent; at && at !== document.body && at !== root; at = at.parentElement) {
      const s = style(at);
      const containing = s.position !== "static" || s.transform !== "none";
      if (at === parent || !needPositioned || containing) {
        if (at !== parent) needPositioned = false;
        if (clips(s.overflowX) || clips(s.overflowY)) {
          const box = at.getBoundingClientRect();
          if (rects.every((r) => outside(r, box, s))) return true;
        }
      }
      if (s.position === "fixed") return false;
      if (s.position === "absolute") needPositioned = true;
    }
    return false;
  };
  // Closed details and content-visibility: auto are shown by a click or by scrolling; kept.
  const deferred = (e) => {
    for (let at = e; at; at = at.parentElement) {
      if (at.tagName === "DETAILS" && !at.open) return true;
      if (at.tagName === "SUMMARY") return false;
      if (style(at).contentVisibility === "auto") return true;
    }
    return false;
  };

  let hidden = 0;
  const drop = [];
  const walk = (element) => {
    for (const child of Array.from(element.children)) {
      if (skip.has(child.tagName)) continue;
      const s = style(child);
      if (s.display === "none" || (s.display !== "contents" && erased(child, s))) {
        hidden += chars(child.textContent || "");
        drop.push(child);
        continue;
      }
      walk(child);
    }
  };
  if (document.body) walk(document.body);
  const unseen = [];
  if (document.body) {
    const dropped = new Set(drop);
    const inDropped = (e) => {
      for (let at = e; at; at = at.parentElement) if (dropped.has(at)) return true;
      return false;
    };
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    while (walker.nextNode()) {
      const text = walker.currentNode;
      const parent = text.parentElement;
      if (!parent || skip.has(parent.tagName) || controls.has(parent.tagName)) continue;
      if (!/\\S/.test(text.data)) continue;
      if (parent.closest("svg") && parent.tagName !== "text" && parent.tagName !== "tspan") continue;
      if (inDropped(parent)) continue;
      const s = style(parent);
      let gone = s.visibility !== "visible" || parseFloat(s.fontSize) < 3 || camouflaged(parent, s);
      if (!gone && !deferred(parent)) {
        range.selectNodeContents(text);
        const rects = Array.from(range.getClientRects()).filter((r) => r.width >= 0.5 && r.height >= 0.5);
        gone = rects.length === 0 || rects.every(offPage) || clippedOut(parent, rects);
      }
      if (gone) unseen.push(text);
    }
  }
  for (const text of unseen) hidden += chars(text.data);
  // Removed from a copy in a document of its own (no browsing context: nothing in it loads or
  // runs), not from the page: the screenshot taken beside this read sees the page untouched.
  const inert = document.implementation.createHTMLDocument("");
  const copy = inert.importNode(root, true);
  const gone = new Set([...drop, ...unseen]);
  if (gone.size) {
    const live = document.createTreeWalker(root, NodeFilter.SHOW_ALL);
    const copied = inert.createTreeWalker(copy, NodeFilter.SHOW_ALL);
    const removals = [];
    for (let a = live.currentNode, b = copied.currentNode; a && b; ) {
      if (gone.has(a)) removals.push(b);
      a = live.nextNode();
      b = copied.nextNode();
    }
    for (const node of removals) node.remove();
  }
  const doctype = document.doctype ? "<!DOCTYPE html>" : "";
  const html = doctype + copy.outerHTML;
  return [html.length > cap ? html.slice(0, cap) : html, hidden, html.length > cap];
}
"""
