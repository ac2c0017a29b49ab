"""The C page walk and link walk (``_walk.c``), bound to the PDFium that pypdfium2 loaded.

The extension links nothing: it calls PDFium through the addresses of the functions pypdfium2
already loaded, given once at import, so it always calls the library the rest of the reader uses.
"""

from __future__ import annotations

import ctypes

import pypdfium2.raw as raw

try:
    from jobs.reader.pdf import _walk
except ImportError as error:  # a checkout updated without reinstalling: say how to build it
    raise ImportError(
        "the PDF page walk (jobs/reader/pdf/_walk.c) is not built: reinstall the package "
        "(pip install -e .), which needs gcc and Python's headers"
    ) from error

# In the order ``_walk.bind`` takes them (its ``pdfium`` struct).
FUNCTIONS = (
    raw.FPDFPage_CountObjects,
    raw.FPDFPage_GetObject,
    raw.FPDFFormObj_CountObjects,
    raw.FPDFFormObj_GetObject,
    raw.FPDFPageObj_GetType,
    raw.FPDFTextObj_GetTextRenderMode,
    raw.FPDFPageObj_GetFillColor,
    raw.FPDFPageObj_GetBounds,
    raw.FPDFTextObj_GetFontSize,
    raw.FPDFPageObj_GetMatrix,
    raw.FPDFPath_GetDrawMode,
    raw.FPDFLink_Enumerate,
    raw.FPDFLink_GetAction,
    raw.FPDFAction_GetURIPath,
)

_walk.bind(tuple(ctypes.cast(function, ctypes.c_void_p).value or 0 for function in FUNCTIONS))
walk = _walk.walk
links = _walk.links
