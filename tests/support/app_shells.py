"""App shells as the common frameworks' starter templates build them, written here from what each
framework's build emits (a mount point, its bundles, its markers), not copied from any of them.

Each is what a server sends before any script ran; ``RENDERED`` is the text the test app's own
script writes into it, so a render can be told from a static read.
"""

from __future__ import annotations

RENDERED = "Quarterly filings are rendered by the client."

_BOOT = (
    "<script>document.addEventListener('DOMContentLoaded',function(){"
    "var m=document.querySelector('[data-mount]')||document.body;"
    f"var p=document.createElement('p');p.textContent={RENDERED!r};m.appendChild(p);}});</script>"
)

SHELLS: dict[str, str] = {
    "react-vite": (
        '<!doctype html><html lang="en"><head><meta charset="UTF-8"><link rel="icon" href="/vite.svg">'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0"><title>Vite + React</title>'
        '<script type="module" crossorigin src="/assets/index-4f2a.js"></script>'
        '<link rel="stylesheet" href="/assets/index-9c1b.css"></head>'
        '<body><div id="root" data-mount></div></body></html>'
    ),
    "create-react-app": (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>React App</title>'
        '<script defer="defer" src="/static/js/main.1a2b.js"></script></head><body>'
        "<noscript>You need to enable JavaScript to run this app.</noscript>"
        '<div id="root" data-mount></div></body></html>'
    ),
    "nextjs-client": (
        '<!DOCTYPE html><html><head><meta charSet="utf-8"/><title></title>'
        '<script src="/_next/static/chunks/webpack.js" defer=""></script>'
        '<script src="/_next/static/chunks/main.js" defer=""></script></head>'
        '<body><div id="__next" data-mount></div>'
        '<script id="__NEXT_DATA__" type="application/json">{"props":{"pageProps":{}},"page":"/"}</script>'
        "</body></html>"
    ),
    "angular": (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>MyApp</title>'
        '<base href="/"><link rel="stylesheet" href="styles.5f.css"></head>'
        "<body><app-root data-mount></app-root>"
        '<script src="polyfills.8a.js" type="module"></script>'
        '<script src="main.3c.js" type="module"></script>'
        "</body></html>"
    ),
    "angular-hydrated": (
        '<!doctype html><html lang="en"><head><title>App</title></head>'
        '<body><app-root ng-version="19.0.0" data-mount></app-root>'
        '<script src="main.js" type="module"></script></body></html>'
    ),
    "vue-vite": (
        '<!DOCTYPE html><html lang="en"><head><meta charset="UTF-8"><title>Vite App</title>'
        '<script type="module" crossorigin src="/assets/index-77.js"></script></head>'
        '<body><div id="app" data-mount></div></body></html>'
    ),
    "vue-cli": (
        "<!DOCTYPE html><html><head><title>vue-project</title></head><body>"
        "<noscript><strong>We're sorry but this app doesn't work properly without JavaScript enabled."
        '</strong></noscript><div id="app" data-mount></div>'
        '<script src="/js/chunk-vendors.js"></script><script src="/js/app.js"></script></body></html>'
    ),
    "nuxt-spa": (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title></title>'
        '<link rel="modulepreload" href="/_nuxt/entry.js"></head>'
        '<body><div id="__nuxt" data-mount></div><script type="module" src="/_nuxt/entry.js"></script>'
        "</body></html>"
    ),
    "sveltekit": (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title></title>'
        '<link rel="modulepreload" href="/_app/immutable/entry/start.js"></head>'
        '<body data-sveltekit-preload-data="hover"><div style="display: contents" data-mount>'
        '<script>{import("/_app/immutable/entry/start.js").then(function(){})}</script></div></body></html>'
    ),
    "svelte-vite": (
        '<!doctype html><html lang="en"><head><title>Svelte</title>'
        '<script type="module" src="/assets/index.js"></script></head>'
        '<body><div id="app" data-mount></div></body></html>'
    ),
    "ember": (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>MyApp</title>'
        '<meta name="my-app/config/environment" content="%7B%22modulePrefix%22%3A%22my-app%22%7D">'
        '<link rel="stylesheet" href="/assets/vendor.css"></head>'
        '<body><script src="/assets/vendor.js"></script><script src="/assets/my-app.js"></script>'
        "</body></html>"
    ),
    "gatsby": (
        '<!DOCTYPE html><html><head><meta charSet="utf-8"/><title></title></head><body>'
        '<div id="___gatsby" data-mount><div style="outline:none" tabindex="-1" id="gatsby-focus-wrapper">'
        '</div></div><script src="/app-1f.js" async=""></script></body></html>'
    ),
    "solid-vite": (
        '<!DOCTYPE html><html lang="en"><head><title>Solid App</title></head><body>'
        "<noscript>You need to enable JavaScript to run this app.</noscript>"
        '<div id="root" data-mount></div><script src="/src/index.tsx" type="module"></script></body></html>'
    ),
    "preact-loading": (
        "<!DOCTYPE html><html><head><title>App</title></head><body>"
        '<div id="app" data-mount><p>Loading…</p></div><script type="module" src="/index.js"></script>'
        "</body></html>"
    ),
    "flutter-web": (
        '<!DOCTYPE html><html><head><base href="/"><meta charset="UTF-8"><title>flutter_app</title>'
        '<link rel="manifest" href="manifest.json"></head>'
        '<body><script src="flutter_bootstrap.js" async></script></body></html>'
    ),
    "flutter-web-booted": (
        "<!DOCTYPE html><html><head><title>app</title></head><body>"
        '<flt-glass-pane data-mount></flt-glass-pane><script src="main.dart.js"></script></body></html>'
    ),
    "blazor-wasm": (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>BlazorApp</title>'
        '<base href="/"><link href="css/app.css" rel="stylesheet"></head><body>'
        '<div id="app" data-mount><svg class="loading-progress"><circle r="40%" cx="50%" cy="50%"/></svg>'
        '<div class="loading-progress-text"></div></div>'
        '<div id="blazor-error-ui">An unhandled error has occurred. <a href="" class="reload">Reload</a>'
        ' <a class="dismiss">\U0001f5d9</a></div>'
        '<script src="_framework/blazor.webassembly.js"></script></body></html>'
    ),
    "blazor-app-element": (
        "<!DOCTYPE html><html><head><title>Blazor</title></head><body>"
        "<app data-mount>Loading...</app>"
        '<div id="blazor-error-ui">An unhandled error has occurred. <a href="" class="reload">Reload</a>'
        ' <a class="dismiss">\U0001f5d9</a></div>'
        '<script src="_framework/blazor.webassembly.js"></script></body></html>'
    ),
    "elm-make": (
        '<!DOCTYPE HTML><html><head><meta charset="UTF-8"><title>Main</title>'
        "<style>body { padding: 0; margin: 0; }</style></head><body>"
        '<pre id="elm" data-mount></pre><script>try { var app = Elm.Main.init({ node: '
        'document.getElementById("elm") }); } catch (e) { }</script></body></html>'
    ),
    "elm-bundle": (
        '<!DOCTYPE html><html><head><title>Elm</title><script src="/elm.js"></script></head>'
        "<body><main data-mount></main><script>Elm.Main.init({node: document.querySelector('main')})"
        "</script></body></html>"
    ),
    "custom-element-root": (
        '<!doctype html><html><head><title>App</title><script type="module" src="/src/my-app.js">'
        "</script></head><body><my-app data-mount></my-app></body></html>"
    ),
    "react-with-chrome": (
        '<!doctype html><html><head><title>Shop</title><script type="module" src="/assets/index.js">'
        "</script></head><body><header><nav><a href=/>Home</a> <a href=/products>Products</a> "
        "<a href=/pricing>Pricing</a> <a href=/about>About us</a> <a href=/contact>Contact</a></nav>"
        '</header><div id="root" data-mount></div>'
        '<div class="cookie-notice"><p>We use cookies to improve your experience on our site and to '
        "show you relevant advertising. By continuing you agree to our use of cookies.</p>"
        "<button>Accept all</button> <button>Manage preferences</button></div>"
        "<footer><p>\u00a9 2026 Example Shop Ltd. All rights reserved.</p><a href=/privacy>Privacy</a> "
        "<a href=/terms>Terms of service</a> <a href=/imprint>Imprint</a></footer></body></html>"
    ),
}

# Short real pages: a mount id and a script, but a sentence of their own (60 characters and more).
SHORT_SENTENCES = (
    "We are closed until Monday; call 555-0100 for anything urgent.",
    "This offer ended on 3 March. Thank you to everyone who took part.",
    "The meeting moved to room 204 on the second floor, at 10:30 sharp.",
    "Our office relocated to 18 Harbour Street, Leith, from 1 June 2026 on.",
    "Registration for the spring course is full; the autumn course opens in May.",
    "The library catalogue is offline for maintenance until 6 pm on Sunday evening.",
)
SHORT_PAGES: dict[str, str] = {
    f"short-{n}-{len(sentence)}": (
        f"<!doctype html><html><head><title>Notice</title><script src='/{kind}.js'></script></head>"
        f"<body><div id='{mount}'><h1>Notice</h1><p>{sentence}</p></div></body></html>"
    )
    for n, (sentence, mount, kind) in enumerate(
        zip(
            SHORT_SENTENCES,
            ["root", "app", "__next", "root", "app", "elm"],
            ["app", "main", "analytics", "a", "b", "c"],
            strict=True,
        )
    )
}

# Short pages that are not shells: a script, little text, but nothing a framework mounts on.
NOT_SHELLS: dict[str, str] = {
    "short-static": "<html><head><title>Moved</title></head><body><p>This page moved.</p></body></html>",
    "gallery": (
        '<html><body><img src="a.jpg"><img src="b.jpg"><script src="/lightbox.js"></script></body></html>'
    ),
    "analytics-only": (
        "<html><body><p>Short note.</p><script>window.dataLayer=[];</script>"
        '<noscript><img src="https://example.org/pixel.gif"></noscript></body></html>'
    ),
    "ssr-next": (
        '<html><head><title>Filing</title></head><body><div id="__next"><article><h1>Annual report</h1>'
        + "<p>The company reported revenue growth across all of its segments this year. </p>" * 8
        + '</article></div><script id="__NEXT_DATA__" type="application/json">{}</script>'
        '<script src="/_next/main.js"></script></body></html>'
    ),
    **SHORT_PAGES,
    "short-custom-element": (
        "<!doctype html><html><head><script type=module src=/x-card.js></script></head><body>"
        "<x-card><p>Tickets for the Saturday concert are sold out; returns go on sale at noon.</p>"
        "</x-card></body></html>"
    ),
    "react-short-notice": (
        "<!doctype html><html><head><script type=module src=/assets/index.js></script></head><body>"
        "<nav><a href=/>Home</a></nav><div id=root><p>This service is paused for maintenance until "
        "Tuesday morning.</p></div><footer>Example Ltd</footer></body></html>"
    ),
}


def with_boot(shell: str) -> str:
    """The shell with a script of its own that writes ``RENDERED`` into the mount point."""
    return shell.replace("</body>", _BOOT + "</body>", 1)
