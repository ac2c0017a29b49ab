"""A page's metadata: each declaration read, with its source, in the documented precedence."""

from __future__ import annotations

import orjson
import pytest

from tests.support.metadata_pages import metadata_of, page, read

JSONLD_ARTICLE = {
    "@context": "https://schema.org",
    "@type": "NewsArticle",
    "headline": "Rates rise again",
    "datePublished": "2025-03-01T10:00:00+01:00",
    "dateModified": "2025-03-02T08:30:00Z",
    "author": [{"@type": "Person", "name": "Jane Doe"}, {"@type": "Person", "name": "John Roe"}],
    "publisher": {"@type": "Organization", "name": "The Daily Example"},
    "description": "The bank raised its rate.",
    "inLanguage": "en-GB",
}


def script(value: object) -> str:
    return f'<script type="application/ld+json">{orjson.dumps(value).decode()}</script>'


def meta(key: str, content: str, attribute: str = "name") -> str:
    return f'<meta {attribute}="{key}" content="{content}">'


async def test_json_ld_gives_every_field_it_declares_with_json_ld_as_their_source() -> None:
    found = await metadata_of(page(script(JSONLD_ARTICLE)))
    assert found["headline"] == "Rates rise again"
    assert found["published"] == "2025-03-01T10:00:00+01:00"
    assert found["modified"] == "2025-03-02T08:30:00Z"
    assert found["author"] == ["Jane Doe", "John Roe"]
    assert found["site_name"] == "The Daily Example"
    assert found["description"] == "The bank raised its rate."
    assert found["language"] == "en-GB"
    assert found["type"] == "NewsArticle"
    for field in (
        "headline",
        "published",
        "modified",
        "author",
        "site_name",
        "description",
        "language",
        "type",
    ):
        assert found["sources"][field] == "json-ld", field


async def test_json_ld_in_a_graph_with_references_by_id_is_read() -> None:
    graph = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebSite", "@id": "https://x.test/#site", "name": "Example Site", "inLanguage": "fr"},
            {"@type": "Person", "@id": "https://x.test/#jane", "name": "Jane Doe"},
            {
                "@type": "WebPage",
                "@id": "https://x.test/a",
                "datePublished": "2024-05-06",
                "mainEntity": {"@id": "https://x.test/a#article"},
            },
            {
                "@type": ["Article", "BlogPosting"],
                "@id": "https://x.test/a#article",
                "headline": "A post",
                "author": {"@id": "https://x.test/#jane"},
                "isPartOf": {"@id": "https://x.test/#site"},
            },
        ],
    }
    found = await metadata_of(page(script(graph)))
    assert found["headline"] == "A post"
    assert found["author"] == ["Jane Doe"]
    assert found["site_name"] == "Example Site"
    assert found["published"] == "2024-05-06"  # the article lacks it; its WebPage declares it
    assert found["language"] == "fr"
    assert found["type"] == "Article"


async def test_a_nested_article_under_a_webpage_is_the_main_entity() -> None:
    value = {
        "@type": "WebPage",
        "name": "Page name | Site",
        "mainEntity": {"@type": "ScholarlyArticle", "headline": "The paper", "author": "Ada Lovelace"},
    }
    found = await metadata_of(page(script(value)))
    assert (found["headline"], found["author"], found["type"]) == (
        "The paper",
        ["Ada Lovelace"],
        "ScholarlyArticle",
    )


async def test_highwire_tags_give_a_papers_title_authors_date_and_doi() -> None:
    head = "".join(
        [
            meta("citation_title", "On the measurement of things"),
            meta("citation_author", "Lovelace, Ada"),
            meta("citation_author", "Babbage, Charles"),
            meta("citation_publication_date", "2021/07/15"),
            meta("citation_doi", "doi:10.1234/abc.567"),
            meta("citation_journal_title", "Journal of Examples"),
        ]
    )
    found = await metadata_of(page(head))
    assert found["headline"] == "On the measurement of things"
    assert found["author"] == ["Ada Lovelace", "Charles Babbage"]
    assert found["published"] == "2021-07-15"
    assert found["doi"] == "10.1234/abc.567"
    assert found["site_name"] == "Journal of Examples"
    assert {found["sources"][f] for f in ("headline", "author", "published", "doi", "site_name")} == {
        "highwire"
    }


async def test_dublin_core_is_read_whatever_the_case_and_separator_of_its_names() -> None:
    head = "".join(
        [
            meta("DC.title", "A report"),
            meta("DC:creator", "Grace Hopper"),
            meta("dcterms.issued", "2019-11-30"),
            meta("DC.language", "de"),
            meta("dcterms.modified", "2020-01-02"),
        ]
    )
    found = await metadata_of(page(head))
    assert (found["headline"], found["author"], found["published"]) == (
        "A report",
        ["Grace Hopper"],
        "2019-11-30",
    )
    assert (found["language"], found["modified"]) == ("de", "2020-01-02")
    assert set(found["sources"].values()) == {"dublin-core"}


async def test_opengraph_and_article_tags_give_title_site_dates_type_and_url() -> None:
    head = "".join(
        [
            meta("og:title", "Storm closes the coast road", "property"),
            meta("og:site_name", "Coast News", "property"),
            meta("og:type", "article", "property"),
            meta("og:url", "https://coast.example.test/storm", "property"),
            meta("og:locale", "en_US", "property"),
            meta("article:published_time", "2023-10-04T06:00:00-04:00", "property"),
            meta("article:modified_time", "2023-10-04T09:15:00-04:00", "property"),
            meta("og:description", "Waves over the road.", "property"),
        ]
    )
    found = await metadata_of(page(head))
    assert found["headline"] == "Storm closes the coast road"
    assert found["site_name"] == "Coast News"
    assert found["type"] == "article"
    assert found["canonical_url"] == "https://coast.example.test/storm"
    assert found["language"] == "en-US"
    assert found["published"] == "2023-10-04T06:00:00-04:00"
    assert found["modified"] == "2023-10-04T09:15:00-04:00"
    assert found["description"] == "Waves over the road."
    assert set(found["sources"].values()) == {"opengraph"}


async def test_plain_meta_tags_give_author_description_date_and_site_name() -> None:
    head = "".join(
        [
            meta("author", "Jane Doe and John Roe"),
            meta("description", "What happened."),
            meta("date", "2022-02-22"),
            meta("application-name", "Example Wiki"),
            meta("twitter:title", "What happened today"),
        ]
    )
    found = await metadata_of(page(head))
    assert found["author"] == ["Jane Doe", "John Roe"]
    assert (found["description"], found["published"]) == ("What happened.", "2022-02-22")
    assert (found["site_name"], found["headline"]) == ("Example Wiki", "What happened today")
    assert set(found["sources"].values()) == {"meta"}


async def test_a_time_element_in_the_article_gives_the_date_and_one_in_the_footer_does_not() -> None:
    body = (
        "<nav><time datetime='2001-01-01'>old</time></nav>"
        "<article><h1>Title</h1><p>Posted <time datetime='2024-08-09T12:00'>Aug 9</time></p></article>"
        "<footer><time datetime='2002-02-02'>copyright</time></footer>"
    )
    found = await metadata_of(page("", body))
    assert (found["published"], found["sources"]["published"]) == ("2024-08-09T12:00:00", "time")


async def test_a_time_marked_pubdate_wins_over_an_earlier_time() -> None:
    body = (
        "<article><time datetime='2024-01-01'>a</time><time pubdate datetime='2024-02-02'>b</time></article>"
    )
    assert (await metadata_of(page("", body)))["published"] == "2024-02-02"


async def test_html_lang_then_the_content_language_header_give_the_language() -> None:
    assert (await metadata_of(page(lang="pt-br")))["language"] == "pt-BR"
    from_header = await metadata_of(page(), content_language="nl")
    assert (from_header["language"], from_header["sources"]["language"]) == ("nl", "meta")
    assert (await metadata_of(page(), content_language="nl, fr"))["language"] is None


async def test_a_canonical_link_is_resolved_made_canonical_and_kept_only_when_https() -> None:
    relative = await metadata_of(page('<link rel="canonical" href="/world/Rates?x=1#top">'))
    assert relative["canonical_url"] == "https://news.example.test/world/Rates?x=1"
    assert relative["sources"]["canonical_url"] == "html"
    for href in ("http://news.example.test/a", "javascript:alert(1)", "https://[::1/", "ftp://x.test/"):
        found = await metadata_of(page(f'<link rel="canonical" href="{href}">'))
        assert found["canonical_url"] is None, href


async def test_json_ld_comes_before_opengraph_which_comes_before_meta() -> None:
    head = (
        script({"@type": "Article", "headline": "From JSON-LD", "datePublished": "2020-01-01"})
        + meta("og:title", "From OpenGraph", "property")
        + meta("article:published_time", "2021-01-01", "property")
        + meta("date", "2022-01-01")
        + meta("author", "Meta Author")
    )
    found = await metadata_of(page(head))
    assert (found["headline"], found["sources"]["headline"]) == ("From JSON-LD", "json-ld")
    assert (found["published"], found["sources"]["published"]) == ("2020-01-01", "json-ld")
    assert (found["author"], found["sources"]["author"]) == (["Meta Author"], "meta")


async def test_an_implausible_declared_date_gives_way_to_the_next_declaration() -> None:
    head = script({"@type": "Article", "datePublished": "0000-00-00"}) + meta("date", "2022-01-01")
    assert (await metadata_of(page(head)))["published"] == "2022-01-01"


async def test_with_nothing_declared_the_date_comes_from_the_url_path() -> None:
    found = await metadata_of(page(), "https://x.test/2024/03/01/a-story")
    assert (found["published"], found["sources"]["published"]) == ("2024-03-01", "url")


async def test_a_declared_date_wins_over_the_url_path() -> None:
    found = await metadata_of(page(meta("date", "2024-03-05")), "https://x.test/2024/03/01/a-story")
    assert found["published"] == "2024-03-05"


async def test_the_byline_under_the_headline_gives_author_and_date_when_nothing_declares_them() -> None:
    body = (
        "<article><h1>Rates rise</h1><p>By Jane Doe, March 1, 2025</p>"
        "<p>The bank raised its rate today.</p></article>"
    )
    document = await read(page("<title>Rates rise</title>", body))
    found = document.metadata
    assert found is not None
    assert (found["author"], found["sources"]["author"]) == (["Jane Doe"], "byline")
    assert (found["published"], found["sources"]["published"]) == ("2025-03-01", "byline")


async def test_a_sentence_starting_with_by_is_not_a_byline() -> None:
    body = "<h1>Notes</h1><p>by the way, this is not a name.</p>"
    assert (await metadata_of(page("", body)))["author"] == []


@pytest.mark.parametrize(
    ("title", "site", "headline"),
    [
        ("Rates rise again | The Daily Example", "The Daily Example", "Rates rise again"),
        ("The Daily Example - Rates rise again", "The Daily Example", "Rates rise again"),
        ("Rates rise again \u2014 Daily Example", "The Daily Example", "Rates rise again"),
        ("Rates rise again as the bank meets - BBC News", None, "Rates rise again as the bank meets"),
        ("Q&A: what the rise means", None, "Q&A: what the rise means"),
        ("Rates - Rise", None, "Rates - Rise"),
    ],
)
async def test_the_headline_drops_the_site_name_the_title_carries(
    title: str, site: str | None, headline: str
) -> None:
    head = f"<title>{title}</title>" + (meta("og:site_name", site, "property") if site else "")
    found = await metadata_of(page(head, "<p>text</p>"), "https://www.bbc.co.uk/news/x")
    assert (found["headline"], found["sources"]["headline"]) == (headline, "html")


async def test_the_main_heading_is_the_headline_when_the_title_holds_it() -> None:
    found = await metadata_of(page("<title>Storm news - Coast</title>", "<h1>Storm news</h1><p>text</p>"))
    assert found["headline"] == "Storm news"


async def test_a_page_that_declares_nothing_has_nulls_and_no_sources() -> None:
    found = await metadata_of(page("", "<p>text</p>"), "https://x.test/plain")
    assert found == {
        "headline": None,
        "published": None,
        "modified": None,
        "author": [],
        "site_name": None,
        "language": None,
        "description": None,
        "canonical_url": None,
        "type": None,
        "doi": None,
        "sources": {},
    }


async def test_invisible_characters_in_metadata_are_removed_and_counted() -> None:
    plain = await read(page(meta("author", "Jane Doe")))
    hidden = await read(page(meta("author", "Ja\u200bne\u202e Doe\u0007")))
    assert hidden.metadata is not None and hidden.metadata["author"] == ["Jane Doe"]
    assert hidden.hidden_removed == plain.hidden_removed + 3


async def test_author_names_and_descriptions_are_bounded() -> None:
    authors = [{"name": f"Author Number {n} " + "x" * 300} for n in range(50)]
    head = script({"@type": "Article", "author": authors, "description": "d" * 5000})
    found = await metadata_of(page(head))
    assert len(found["author"]) == 20
    assert all(len(name) <= 200 for name in found["author"])
    assert found["description"] is not None and len(found["description"]) == 1000


async def test_urls_and_handles_are_not_author_names() -> None:
    head = meta("article:author", "https://www.facebook.com/jane", "property") + meta("author", "@jane")
    assert (await metadata_of(page(head)))["author"] == []


async def test_text_bodies_carry_no_metadata() -> None:
    from jobs.reader.document import build_document

    document = await build_document(
        b"plain",
        "text/plain",
        "https://x.test/",
        extract="main",
        max_chars=100,
        cpu_budget_s=1.0,
        body_truncated=False,
    )
    assert document.metadata is None


@pytest.mark.parametrize(
    ("declared", "names"),
    [
        ("Jane Doe", ["Jane Doe"]),
        ("By Jane Doe", ["Jane Doe"]),
        ("Doe, Jane", ["Doe, Jane"]),
        ("Jane Doe; John Roe", ["Jane Doe", "John Roe"]),
        ("Jane Doe, John Roe", ["Jane Doe", "John Roe"]),
        ("Jane Doe and John Roe", ["Jane Doe", "John Roe"]),
        (
            "Meg Kinnard and Errin Haines, Associated Press",
            ["Meg Kinnard", "Errin Haines", "Associated Press"],
        ),
        ("Tom Krisher, AP Auto Writer", ["Tom Krisher"]),
        ("Jobs & Hire", ["Jobs & Hire"]),
        (
            "Bundesministerium für Wirtschaft und Klimaschutz",
            ["Bundesministerium für Wirtschaft und Klimaschutz"],
        ),
        ("Jane Doe; jane doe", ["Jane Doe"]),
        ("\u00a9 2024 Example Media", []),
        ("Copyright Example GmbH", []),
    ],
)
async def test_a_meta_author_is_split_into_the_names_it_holds(declared: str, names: list[str]) -> None:
    assert (await metadata_of(page(meta("author", declared))))["author"] == names
