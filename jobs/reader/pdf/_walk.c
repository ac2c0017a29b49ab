/* The page walk of jobs/reader/pdf/scan.py in C: the same decisions, without a foreign call from
 * Python per PDFium call.
 *
 * A page makes five or six PDFium calls per object and has over a hundred objects; through ctypes
 * each call costs more than PDFium's own work, and that alone put the reader past 1.5x pypdfium2's
 * plain extraction (bench/pdf.py's "floor"). Here the walk calls PDFium directly, through the
 * function addresses pypdfium2 already loaded (``bind``), so this module links nothing and needs
 * no PDFium headers: the handful of signatures it calls are declared below from fpdf_edit.h and
 * fpdf_doc.h. The page's links are read here too (``links``): PDFium's parse of each annotation is
 * most of their cost, and three foreign calls per link from Python were the rest.
 *
 * It settles every text object that visibility.judge would find seen without reading an image's
 * pixels (judge's own steps, in its order, with scan.PageScan._beneath's look at what lies beneath)
 * and hands back the rest, with every paint of the page, for the Python judgement: text it would
 * find hidden, text over an image, text straddling the page's edge, text in another render mode.
 * So a mistake here can only hand the judgement more text than it needs, never settle text it
 * would hide; tests/test_pdf_native_walk.py holds both walks to the same verdicts on generated
 * hostile pages, and bench/pdf_walk_check.py on the printed corpora. The arithmetic mirrors
 * Python's step by step (doubles from PDFium's floats, Python's min and max, round half to even,
 * the same order of operations, no fused multiply-add: setup.py builds it with
 * -ffp-contract=off), so a page with NaN or infinite coordinates gets the same answer from both.
 *
 * Nothing here parses the document: every byte of it is PDFium's to read. Memory grows with the
 * objects visited, which the caller bounds (``max_objects``), and forms nest at most ``max_depth``.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* PDFium's values (fpdf_edit.h, fpdfview.h). */
#define PAGEOBJ_TEXT 1
#define PAGEOBJ_PATH 2
#define PAGEOBJ_IMAGE 3
#define PAGEOBJ_SHADING 4
#define PAGEOBJ_FORM 5
#define RENDERMODE_UNKNOWN (-1)

/* The thresholds of jobs/reader/pdf/visibility.py and scan.py; tests/test_pdf_native_walk.py
 * checks them against the Python constants. */
#define MIN_READABLE_PT 2.0
#define NEAR_WHITE 24
#define MIN_VISIBLE_ALPHA 26
#define MAX_BENEATH 64

typedef void *handle_t;
typedef struct {
    float a, b, c, d, e, f;
} fs_matrix;

/* The PDFium functions the walks call, in the order ``bind`` takes their addresses. */
static struct {
    int (*count_objects)(handle_t page);
    handle_t (*get_object)(handle_t page, int index);
    int (*count_form_objects)(handle_t form);
    handle_t (*get_form_object)(handle_t form, unsigned long index);
    int (*object_type)(handle_t object);
    int (*render_mode)(handle_t text);
    int (*fill_color)(handle_t object, unsigned *r, unsigned *g, unsigned *b, unsigned *a);
    int (*bounds)(handle_t object, float *left, float *bottom, float *right, float *top);
    int (*font_size)(handle_t text, float *size);
    int (*matrix)(handle_t object, fs_matrix *matrix);
    int (*draw_mode)(handle_t path, int *fill_mode, int *stroke);
    int (*enumerate_links)(handle_t page, int *start_pos, handle_t *link);
    handle_t (*link_action)(handle_t link);
    unsigned long (*uri_path)(handle_t document, handle_t action, void *buffer, unsigned long length);
} pdfium;
#define FUNCTIONS 14
_Static_assert(sizeof(pdfium) == FUNCTIONS * sizeof(void *), "one pointer per function, no padding");
static int bound = 0;

typedef struct {
    double left, bottom, right, top;
} box_t;

typedef struct {
    int has;
    double m[6];
} matrix_t; /* a to f; ``has`` 0 for none (the page itself) */

typedef struct {
    long order;
    box_t box;
    int image;     /* an image or a shading */
    int has_color; /* a path that fills */
    unsigned color[4];
    handle_t handle; /* an image with a matrix: its object, else NULL */
    matrix_t to_page;
} paint_t;

typedef struct {
    long order;
    handle_t handle;
    matrix_t to_page;
} text_t;

typedef struct {
    box_t page;
    long visited, max_objects, order;
    int max_depth;
    long images;
    paint_t *paints; /* in painting order */
    Py_ssize_t paints_length, paints_capacity;
    text_t *texts;
    Py_ssize_t texts_length, texts_capacity;
    /* PDFium's out-values, shared as scan.py shares its ctypes buffers: a call that fails leaves
     * the last values, and both walks then read the same stale ones. */
    unsigned colors[4];
    float floats[7]; /* bounds, or a matrix a to f; then a font size */
    int draw_modes[2];
} walk_t;

static int grow(void **items, Py_ssize_t *capacity, Py_ssize_t length, size_t size) {
    if (length < *capacity)
        return 0;
    Py_ssize_t wanted = *capacity ? *capacity * 2 : 64;
    void *larger = PyMem_Realloc(*items, (size_t)wanted * size);
    if (larger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = larger;
    *capacity = wanted;
    return 0;
}

/* Python's min and max of four floats: the first, replaced by each later one that compares less
 * (greater), which is what they return when a NaN is among them. */
static double py_min4(const double v[4]) {
    double result = v[0];
    for (int i = 1; i < 4; i++)
        if (v[i] < result)
            result = v[i];
    return result;
}

static double py_max4(const double v[4]) {
    double result = v[0];
    for (int i = 1; i < 4; i++)
        if (v[i] > result)
            result = v[i];
    return result;
}

/* scan._transform: the box's corners through the matrix, and the box around them. */
static box_t transform(box_t box, const double *m) {
    double cx[4] = {box.left, box.left, box.right, box.right};
    double cy[4] = {box.bottom, box.top, box.bottom, box.top};
    double xs[4], ys[4];
    for (int i = 0; i < 4; i++) {
        xs[i] = m[0] * cx[i] + m[2] * cy[i] + m[4];
        ys[i] = m[1] * cx[i] + m[3] * cy[i] + m[5];
    }
    box_t out = {py_min4(xs), py_min4(ys), py_max4(xs), py_max4(ys)};
    return out;
}

/* scan._compose: ``inner`` then ``outer``. */
static void compose(const double *inner, const double *outer, double *out) {
    double a = inner[0], b = inner[1], c = inner[2], d = inner[3], e = inner[4], f = inner[5];
    double a2 = outer[0], b2 = outer[1], c2 = outer[2], d2 = outer[3], e2 = outer[4], f2 = outer[5];
    out[0] = a * a2 + b * c2;
    out[1] = a * b2 + b * d2;
    out[2] = c * a2 + d * c2;
    out[3] = c * b2 + d * d2;
    out[4] = e * a2 + f * c2 + e2;
    out[5] = e * b2 + f * d2 + f2;
}

static box_t read_bounds(walk_t *w, handle_t object, const matrix_t *to_page) {
    float *fl = w->floats;
    pdfium.bounds(object, &fl[0], &fl[1], &fl[2], &fl[3]);
    box_t box = {fl[0], fl[1], fl[2], fl[3]};
    return to_page->has ? transform(box, to_page->m) : box;
}

static int read_matrix(walk_t *w, handle_t object, double *out) {
    if (!pdfium.matrix(object, (fs_matrix *)w->floats))
        return 0;
    for (int i = 0; i < 6; i++)
        out[i] = w->floats[i];
    return 1;
}

static int add_text(walk_t *w, long order, handle_t handle, const matrix_t *to_page) {
    if (grow((void **)&w->texts, &w->texts_capacity, w->texts_length, sizeof(text_t)) < 0)
        return -1;
    text_t *text = &w->texts[w->texts_length++];
    text->order = order;
    text->handle = handle;
    text->to_page = *to_page;
    return 0;
}

static paint_t *new_paint(walk_t *w) {
    if (grow((void **)&w->paints, &w->paints_capacity, w->paints_length, sizeof(paint_t)) < 0)
        return NULL;
    paint_t *paint = &w->paints[w->paints_length++];
    memset(paint, 0, sizeof(*paint));
    paint->order = ++w->order;
    return paint;
}

/* visibility.over: ``paint`` drawn over ``below`` at its own opacity. Python's round() is half to
 * even, as rint() is in the default rounding mode. */
static void over(const long below[3], const long paint[4], long out[3]) {
    double alpha = paint[3] / 255.0;
    for (int c = 0; c < 3; c++)
        out[c] = (long)rint(paint[c] * alpha + below[c] * (1 - alpha));
}

/* visibility.blends_in */
static int blends_in(const long color[4], const long background[3]) {
    long shown[3];
    over(background, color, shown);
    for (int c = 0; c < 3; c++)
        if (labs(shown[c] - background[c]) > NEAR_WHITE)
            return 0;
    return 1;
}

enum beneath { BARE_PAGE, COLOR, PICTURE, IMAGE };

/* scan.PageScan._beneath at (x, y) for a text drawn after every paint so far: the paints under
 * the point, topmost first down to the first opaque one, composed over the white page into
 * ``color``. An image with pixels to read is the Python judgement's to look at (IMAGE); a shading,
 * an image with no matrix, or too much beneath to judge is a picture, on which text is seen. */
static enum beneath beneath(const walk_t *w, double x, double y, long color[3]) {
    long layers[MAX_BENEATH + 1][4];
    int count = 0;
    Py_ssize_t start = w->paints_length - MAX_BENEATH - 1;
    int looked = 0;
    for (Py_ssize_t i = w->paints_length - 1; i >= (start < 0 ? 0 : start); i--, looked++) {
        if (looked >= MAX_BENEATH)
            return PICTURE;
        const paint_t *paint = &w->paints[i];
        if (!(paint->box.left <= x && x <= paint->box.right && paint->box.bottom <= y && y <= paint->box.top))
            continue;
        if (paint->image)
            return paint->handle != NULL ? IMAGE : PICTURE;
        if (paint->has_color && paint->color[3] >= MIN_VISIBLE_ALPHA) {
            for (int c = 0; c < 4; c++)
                layers[count][c] = paint->color[c];
            count++;
            if (paint->color[3] == 255)
                break;
        }
    }
    color[0] = color[1] = color[2] = 255;
    if (!count)
        return BARE_PAGE;
    for (int i = count - 1; i >= 0; i--) {
        long below[3] = {color[0], color[1], color[2]};
        over(below, layers[i], color);
    }
    return COLOR;
}

static int walk_objects(walk_t *w, handle_t parent, int count, handle_t form, const matrix_t *to_page, int depth);

/* scan.PageScan._open_form */
static int open_form(walk_t *w, handle_t form, const matrix_t *to_page, int depth) {
    double own[6];
    if (depth >= w->max_depth || !read_matrix(w, form, own))
        return 0;
    matrix_t inner = {1, {0}};
    if (to_page->has)
        compose(own, to_page->m, inner.m);
    else
        memcpy(inner.m, own, sizeof(own));
    return walk_objects(w, NULL, pdfium.count_form_objects(form), form, &inner, depth + 1);
}

/* scan.PageScan._walk, object by object. */
static int walk_objects(walk_t *w, handle_t parent, int count, handle_t form, const matrix_t *to_page, int depth) {
    unsigned *colors = w->colors;
    float *fl = w->floats;
    const box_t page = w->page;
    double form_scale = 1.0;
    if (to_page->has)
        form_scale = sqrt(fabs(to_page->m[0] * to_page->m[3] - to_page->m[1] * to_page->m[2]));
    for (int index = 0; index < count; index++) {
        if (w->visited >= w->max_objects)
            return 0;
        w->visited++;
        handle_t handle = form == NULL ? pdfium.get_object(parent, index)
                                       : pdfium.get_form_object(form, (unsigned long)index);
        if (handle == NULL)
            continue;
        int mode = pdfium.render_mode(handle);
        if (mode == RENDERMODE_UNKNOWN) { /* not text: only text objects have a render mode */
            int kind = pdfium.object_type(handle);
            if (kind == PAGEOBJ_FORM) {
                if (open_form(w, handle, to_page, depth) < 0)
                    return -1;
            } else if (kind == PAGEOBJ_PATH) {
                paint_t *paint = new_paint(w);
                if (paint == NULL)
                    return -1;
                pdfium.draw_mode(handle, &w->draw_modes[0], &w->draw_modes[1]);
                if (!w->draw_modes[0]) { /* fills nothing: never beneath text, so no box */
                    paint->box = (box_t){INFINITY, INFINITY, -INFINITY, -INFINITY};
                } else {
                    paint->has_color = 1;
                    if (pdfium.fill_color(handle, &colors[0], &colors[1], &colors[2], &colors[3]))
                        memcpy(paint->color, colors, sizeof(paint->color));
                    else
                        paint->color[3] = 255; /* opaque black */
                    paint->box = read_bounds(w, handle, to_page);
                }
            } else if (kind == PAGEOBJ_IMAGE || kind == PAGEOBJ_SHADING) {
                paint_t *paint = new_paint(w);
                if (paint == NULL)
                    return -1;
                paint->image = 1;
                paint->box = read_bounds(w, handle, to_page);
                double own[6];
                if (kind == PAGEOBJ_IMAGE && read_matrix(w, handle, own)) {
                    paint->handle = handle;
                    paint->to_page.has = 1;
                    if (to_page->has)
                        compose(own, to_page->m, paint->to_page.m);
                    else
                        memcpy(paint->to_page.m, own, sizeof(own));
                }
                w->images += kind == PAGEOBJ_IMAGE;
            } else if (kind == PAGEOBJ_TEXT) { /* text PDFium knows no render mode for */
                if (add_text(w, ++w->order, handle, to_page) < 0)
                    return -1;
            }
            continue;
        }
        /* Text: settled here when visibility.judge would find it seen with no image's pixels to
         * read; anything else is the Python judgement's (it then finds it hidden, or needs pixels,
         * or straddles the page's edge). The steps are judge's, in its order. */
        long order = ++w->order;
        long fill[4];
        if (mode != 0 || !pdfium.fill_color(handle, &colors[0], &colors[1], &colors[2], &colors[3])) {
            if (add_text(w, order, handle, to_page) < 0) /* stroked, invisible or unknown paint */
                return -1;
            continue;
        }
        for (int c = 0; c < 4; c++)
            fill[c] = colors[c];
        if (fill[3] < MIN_VISIBLE_ALPHA) { /* paints nothing seen: invisible unless over a picture */
            if (add_text(w, order, handle, to_page) < 0)
                return -1;
            continue;
        }
        box_t box = read_bounds(w, handle, to_page);
        if (!(page.left <= box.left && box.right <= page.right && page.bottom <= box.bottom && box.top <= page.top)) {
            if (add_text(w, order, handle, to_page) < 0) /* off the page, or straddling its edge */
                return -1;
            continue;
        }
        /* scan.PageScan._size: the font size times every scale applied to it. */
        fl[6] = 0.0f;
        pdfium.font_size(handle, &fl[6]);
        double size = 0.0, scale = 0.0;
        if (pdfium.matrix(handle, (fs_matrix *)fl)) {
            size = fl[6];
            scale = sqrt(fabs((double)fl[0] * fl[3] - (double)fl[1] * fl[2]));
        }
        if (to_page->has)
            scale *= form_scale;
        if (size * scale < MIN_READABLE_PT) {
            if (add_text(w, order, handle, to_page) < 0)
                return -1;
            continue;
        }
        long under[3];
        enum beneath found = beneath(w, (box.left + box.right) / 2, (box.bottom + box.top) / 2, under);
        if (found == IMAGE || ((found == COLOR || found == BARE_PAGE) && blends_in(fill, under)))
            if (add_text(w, order, handle, to_page) < 0)
                return -1;
    }
    return 0;
}

static PyObject *matrix_tuple(const matrix_t *m) {
    if (!m->has)
        Py_RETURN_NONE;
    return Py_BuildValue("(dddddd)", m->m[0], m->m[1], m->m[2], m->m[3], m->m[4], m->m[5]);
}

static PyObject *results(walk_t *w) {
    PyObject *texts = PyList_New(w->texts_length);
    if (texts == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < w->texts_length; i++) {
        text_t *t = &w->texts[i];
        PyObject *item = Py_BuildValue("(lnN)", t->order, (Py_ssize_t)(uintptr_t)t->handle, matrix_tuple(&t->to_page));
        if (item == NULL) {
            Py_DECREF(texts);
            return NULL;
        }
        PyList_SET_ITEM(texts, i, item);
    }
    /* The paints matter only to the text left undecided: a page with none returns no paints. */
    Py_ssize_t paints_length = w->texts_length ? w->paints_length : 0;
    PyObject *paints = PyList_New(paints_length);
    if (paints == NULL) {
        Py_DECREF(texts);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < paints_length; i++) {
        paint_t *p = &w->paints[i];
        PyObject *color;
        if (p->has_color)
            color = Py_BuildValue("(IIII)", p->color[0], p->color[1], p->color[2], p->color[3]);
        else {
            color = Py_None;
            Py_INCREF(color);
        }
        PyObject *item = color == NULL ? NULL
                                       : Py_BuildValue("(l(dddd)ONnN)", p->order, p->box.left, p->box.bottom, p->box.right,
                                                       p->box.top, p->image ? Py_True : Py_False, color,
                                                       (Py_ssize_t)(uintptr_t)p->handle, matrix_tuple(&p->to_page));
        if (item == NULL) {
            Py_DECREF(texts);
            Py_DECREF(paints);
            return NULL;
        }
        PyList_SET_ITEM(paints, i, item);
    }
    return Py_BuildValue("(lNN)", w->images, texts, paints);
}

static void release(walk_t *w) {
    PyMem_Free(w->paints);
    PyMem_Free(w->texts);
}

PyDoc_STRVAR(walk_doc, "walk(page, visible_box, max_objects, max_depth) -> (images, undecided, paints)\n\n"
                       "The page's objects in painting order, as scan.PageScan._walk decides them: the\n"
                       "number of images; the text objects not settled as seen, as (order, address,\n"
                       "to_page or None); and, when there are any, every paint as (order, box, image,\n"
                       "fill colour or None, image address or 0, image to_page or None).");

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t page_address;
    walk_t w;
    memset(&w, 0, sizeof(w));
    if (!PyArg_ParseTuple(args, "n(dddd)li:walk", &page_address, &w.page.left, &w.page.bottom, &w.page.right,
                          &w.page.top, &w.max_objects, &w.max_depth))
        return NULL;
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind() PDFium's functions before walking a page");
        return NULL;
    }
    if (page_address == 0) {
        PyErr_SetString(PyExc_ValueError, "no page");
        return NULL;
    }
    w.order = -1;
    handle_t page = (handle_t)(uintptr_t)page_address;
    matrix_t none = {0, {0}};
    PyObject *result = NULL;
    if (walk_objects(&w, page, pdfium.count_objects(page), NULL, &none, 0) == 0)
        result = results(&w);
    release(&w);
    return result;
}

PyDoc_STRVAR(bind_doc, "bind(addresses)\n\nThe addresses of PDFium's functions, as pypdfium2 loaded them, in the\n"
                       "order of jobs.reader.pdf.native.FUNCTIONS.");

static PyObject *bind(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *addresses;
    if (!PyArg_ParseTuple(args, "O!:bind", &PyTuple_Type, &addresses))
        return NULL;
    if (PyTuple_GET_SIZE(addresses) != FUNCTIONS) {
        PyErr_Format(PyExc_ValueError, "bind() takes %d addresses", FUNCTIONS);
        return NULL;
    }
    void *slots[FUNCTIONS];
    for (Py_ssize_t i = 0; i < FUNCTIONS; i++) {
        slots[i] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(addresses, i));
        if (slots[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a PDFium function's address is missing");
            return NULL;
        }
    }
    /* Function pointers from object pointers: POSIX guarantees they convert (dlsym relies on it).
     * The struct holds FUNCTIONS pointers in the order of native.FUNCTIONS. */
    memcpy(&pdfium, slots, sizeof(pdfium));
    bound = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(links_doc, "links(page, document, max_count, max_bytes) -> list[str]\n\n"
                        "The URIs of the page's link annotations, in annotation order: other actions, and\n"
                        "URIs longer than max_bytes, are skipped; each is read byte for byte (Latin-1).");

/* text._uris: PDFium parses each annotation on the first call that reaches it, and writes a URI
 * into the buffer only when it fits, saying its size either way. */
static PyObject *links(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t page_address, document_address, max_count, max_bytes;
    if (!PyArg_ParseTuple(args, "nnnn:links", &page_address, &document_address, &max_count, &max_bytes))
        return NULL;
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind() PDFium's functions before reading links");
        return NULL;
    }
    if (page_address == 0 || document_address == 0 || max_bytes < 2) {
        PyErr_SetString(PyExc_ValueError, "no page, no document, or no room for a URI");
        return NULL;
    }
    char *buffer = PyMem_Malloc((size_t)max_bytes);
    PyObject *found = PyList_New(0);
    if (buffer == NULL || found == NULL) {
        PyMem_Free(buffer);
        Py_XDECREF(found);
        return PyErr_NoMemory();
    }
    handle_t page = (handle_t)(uintptr_t)page_address, document = (handle_t)(uintptr_t)document_address;
    int position = 0;
    handle_t link = NULL;
    while (PyList_GET_SIZE(found) < max_count && pdfium.enumerate_links(page, &position, &link)) {
        handle_t action = pdfium.link_action(link);
        if (action == NULL)
            continue;
        unsigned long size = pdfium.uri_path(document, action, buffer, (unsigned long)max_bytes);
        if (!(1 < size && size <= (unsigned long)max_bytes)) /* 0: not a URI; or too long */
            continue;
        PyObject *uri = PyUnicode_DecodeLatin1(buffer, (Py_ssize_t)size - 1, NULL);
        if (uri == NULL || PyList_Append(found, uri) < 0) {
            Py_XDECREF(uri);
            Py_DECREF(found);
            PyMem_Free(buffer);
            return NULL;
        }
        Py_DECREF(uri);
    }
    PyMem_Free(buffer);
    return found;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, walk_doc},
    {"bind", bind, METH_VARARGS, bind_doc},
    {"links", links, METH_VARARGS, links_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "jobs.reader.pdf._walk",
    .m_doc = "The page walk of scan.py, in C (see the file's header).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__walk(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "MAX_BENEATH", MAX_BENEATH) < 0 || PyModule_AddIntConstant(m, "NEAR_WHITE", NEAR_WHITE) < 0 ||
        PyModule_AddIntConstant(m, "MIN_VISIBLE_ALPHA", MIN_VISIBLE_ALPHA) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *readable = PyFloat_FromDouble(MIN_READABLE_PT);
    int failed = readable == NULL || PyModule_AddObjectRef(m, "MIN_READABLE_PT", readable) < 0;
    Py_XDECREF(readable);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
