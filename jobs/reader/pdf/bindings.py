"""PDFium's calls that run for every object and every character of a page, bound without ctypes'
argument checks.

pypdfium2 declares each function's argument types, and ctypes then converts every argument on
every call: for a call with four out-pointers that is two thirds of its cost, and a page makes a
few hundred such calls. These are the same functions of the same library, with only the result
type declared, so each argument must already be what the C side takes: a handle PDFium returned
(a ctypes pointer), a ``ctypes.byref`` out-pointer, or a Python int for a C ``int`` (never for a
wider integer: those are passed as ctypes values, see ``FORM_OBJECT``).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pypdfium2.raw as raw


class Handle(ctypes.c_void_p):
    """An object handle as PDFium returned it: a subclass, so ctypes keeps it a pointer (a plain
    c_void_p result comes back as a Python int, which would be passed back as a 32-bit int)."""


def _unchecked(function: Any, restype: Any) -> Any:
    bare = type(function)(ctypes.cast(function, ctypes.c_void_p).value)
    bare.restype = restype
    return bare


_int = ctypes.c_int
# Objects: what they are and how they are painted. (A call on the wrong kind of object answers
# "unknown" or false: FPDFTextObj_GetTextRenderMode is -1 for anything not text.)
count_objects = _unchecked(raw.FPDFPage_CountObjects, _int)
get_object = _unchecked(raw.FPDFPage_GetObject, Handle)
count_form_objects = _unchecked(raw.FPDFFormObj_CountObjects, _int)
get_form_object = _unchecked(raw.FPDFFormObj_GetObject, Handle)  # index: a ctypes.c_ulong
object_type = _unchecked(raw.FPDFPageObj_GetType, _int)
render_mode = _unchecked(raw.FPDFTextObj_GetTextRenderMode, _int)
fill_color = _unchecked(raw.FPDFPageObj_GetFillColor, _int)
stroke_color = _unchecked(raw.FPDFPageObj_GetStrokeColor, _int)
bounds = _unchecked(raw.FPDFPageObj_GetBounds, _int)
font_size = _unchecked(raw.FPDFTextObj_GetFontSize, _int)
matrix = _unchecked(raw.FPDFPageObj_GetMatrix, _int)
draw_mode = _unchecked(raw.FPDFPath_GetDrawMode, _int)
# Images: their size and their decoded pixels (a bitmap the caller destroys).
image_pixel_size = _unchecked(raw.FPDFImageObj_GetImagePixelSize, _int)
image_bitmap = _unchecked(raw.FPDFImageObj_GetBitmap, Handle)
bitmap_format = _unchecked(raw.FPDFBitmap_GetFormat, _int)
bitmap_width = _unchecked(raw.FPDFBitmap_GetWidth, _int)
bitmap_height = _unchecked(raw.FPDFBitmap_GetHeight, _int)
bitmap_stride = _unchecked(raw.FPDFBitmap_GetStride, _int)
bitmap_buffer = _unchecked(raw.FPDFBitmap_GetBuffer, ctypes.c_void_p)
bitmap_destroy = _unchecked(raw.FPDFBitmap_Destroy, None)
# Characters: the object each one belongs to (an address, None for one PDFium generated), its box.
char_object = _unchecked(raw.FPDFText_GetTextObject, ctypes.c_void_p)
char_box = _unchecked(raw.FPDFText_GetCharBox, _int)


def address(handle: Any) -> int:
    """A handle's address, whichever way it was returned (a Handle, or a pypdfium2 pointer to an
    opaque struct: the address of what it points to, which costs a twentieth of a ctypes.cast)."""
    if isinstance(handle, ctypes.c_void_p):
        return handle.value or 0
    return ctypes.addressof(handle.contents) if handle else 0
