"""OCR's three settings: their defaults, what they take, and what stops a worker at start-up."""

from __future__ import annotations

import pytest

from worker.config import ConfigError, Settings


def test_the_defaults_read_english_within_two_hundred_pages() -> None:
    settings = Settings.from_env({})
    assert (settings.ocr, settings.ocr_languages, settings.ocr_budget_pages) == (True, "eng", 200)


@pytest.mark.parametrize(
    ("raw", "languages"), [("eng", "eng"), ("eng+deu", "eng+deu"), (" fra , chi_sim ", "fra+chi_sim")]
)
def test_languages_are_tesseract_codes_joined_by_plus(raw: str, languages: str) -> None:
    assert Settings.from_env({"RESEARCH_OCR_LANGUAGES": raw}).ocr_languages == languages


@pytest.mark.parametrize("raw", ["../../etc/passwd", "english", "eng+", "+".join(["eng"] * 9), "ENG", "e ng"])
def test_a_language_that_is_not_a_code_stops_the_worker_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"RESEARCH_OCR_LANGUAGES": raw})
    assert "RESEARCH_OCR_LANGUAGES" in str(caught.value)


def test_ocr_turns_off_and_the_budget_is_a_bounded_count() -> None:
    settings = Settings.from_env({"RESEARCH_OCR": "off", "RESEARCH_OCR_BUDGET_PAGES": "0"})
    assert settings.ocr is False and settings.ocr_budget_pages == 0
    with pytest.raises(ConfigError):
        Settings.from_env({"RESEARCH_OCR_BUDGET_PAGES": "-1"})
