/* hangdbg.evidence.nccl._cscan: the hot loop of hangdbg.evidence.nccl.grammar._scan_chunk in C (optional accelerator).
 *
 * scan(buffer, start, stop) -> (nlines, coll, lasts, other)
 *
 * The lines are buffer[start:stop].split(b"\n") after one trailing newline of the range is dropped
 * (exactly the lines _FAST.findall sees in _scan_chunk). A line is a standard collective record
 * when it matches the first alternative of _FAST in hangdbg/evidence/nccl/grammar.py (NCCL_DEBUG_SUBSYS=COLL
 * line, NCCL 2.x src/enqueue.cc, as printed through src/debug.cc):
 *
 *   HOST:PID:TID [DEV] NCCL INFO Name: opCount HEX sendbuff S recvbuff S count N datatype N op N
 *   root [-]N comm 0xHEX [nranks=N] stream (0xHEX|(nil))[\r]
 *
 * with HOST = 1+ ASCII bytes other than whitespace (" \t\n\r\f\v\x1c-\x1f") and ":[]()<>", N = ASCII
 * digits, Name = [A-Z][A-Za-z]+, S = 1+ bytes other than ASCII whitespace. The regex has a single
 * way to match each line (every variable-length field is followed by a byte it cannot contain), so
 * this left-to-right check accepts exactly what the regex accepts.
 *
 *   nlines: number of lines;
 *   coll:   {(head, comm): count} with head = b"HOST:PID:TID [DEV] NCCL INFO Name" and
 *           comm = b"0xHEX [nranks=N]", keys in order of first occurrence (as Counter(rows));
 *   lasts:  {(b"HOST:PID:TID [DEV]", comm): (line index, opCount bytes, Name bytes)} for the last
 *           collective line of each pair (what _lasts returns);
 *   other:  [(line index, line bytes)] for the other lines _scan_chunk keeps: those containing
 *           NCCL/INFO/WARN/TRACE, the first line, and any line right after a kept one.
 *
 * Python objects are made once per distinct key, not per line. The buffer (bytes, mmap...) is read
 * in place; the GIL is released during the walk.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t head, head_len;  /* offsets into the buffer */
    Py_ssize_t comm, comm_len;
    Py_ssize_t op, op_len;      /* opCount of the last line */
    Py_ssize_t name_len;        /* Name is the end of head */
    Py_ssize_t last_idx;
    Py_ssize_t count;
    uint64_t hash;
} Entry;

typedef struct {
    Entry *entries;
    Py_ssize_t n, cap;
    Py_ssize_t *slots;  /* index + 1, 0 = empty */
    size_t mask;
    Py_ssize_t *other;  /* line start, line end, line index: triples */
    Py_ssize_t nother, capother;
    const unsigned char *buf;
} Table;

/* byte classes */
#define C_WS 1     /* \s of a bytes pattern: [ \t\n\r\f\v] */
#define C_HOST 2   /* [^\s:\[\]()<>] */
#define C_DIGIT 4
#define C_HEX 8
#define C_UPPER 16
#define C_ALPHA 32
static unsigned char CLS[256];

static void init_classes(void) {
    for (int c = 0; c < 256; c++) {
        unsigned char k = 0;
        int ws = (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v');
        if (ws) k |= C_WS;
        if (!ws && !strchr(":[]()<>", c) && !(c >= 0x1c && c <= 0x1f) && c < 0x80) k |= C_HOST;
        if (c == 0) k |= C_HOST;  /* strchr finds the terminator for 0 */
        if (c >= '0' && c <= '9') k |= C_DIGIT | C_HEX;
        if ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) k |= C_HEX;
        if (c >= 'A' && c <= 'Z') k |= C_UPPER | C_ALPHA;
        if (c >= 'a' && c <= 'z') k |= C_ALPHA;
        CLS[c] = k;
    }
}

#define LIT(s) (s), (sizeof(s) - 1)

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* n bytes equal; inlined word compares (libc memcmp calls were a quarter of the time) */
INLINE int eq(const unsigned char *p, const unsigned char *s, size_t n) {
    while (n >= 8) {
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, s, 8);
        if (a != b) return 0;
        p += 8, s += 8, n -= 8;
    }
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, s, 4);
        if (a != b) return 0;
        p += 4, s += 4, n -= 4;
    }
    while (n--)
        if (*p++ != *s++) return 0;
    return 1;
}

INLINE int lit(const unsigned char **p, const unsigned char *e, const char *s, size_t n) {
    if ((size_t)(e - *p) < n || !eq(*p, (const unsigned char *)s, n)) return 0;
    *p += n;
    return 1;
}

INLINE int run(const unsigned char **p, const unsigned char *e, unsigned char cls) {
    const unsigned char *q = *p;
    while (q < e && (CLS[*q] & cls)) q++;
    if (q == *p) return 0;
    *p = q;
    return 1;
}

INLINE int nonws(const unsigned char **p, const unsigned char *e) {
    const unsigned char *q = *p;
    while (q < e && !(CLS[*q] & C_WS)) q++;
    if (q == *p) return 0;
    *p = q;
    return 1;
}

typedef struct {
    const unsigned char *head, *name, *head_end, *op, *op_end, *comm, *comm_end;
} Coll;

/* Match the collective record at p (bytes up to the end of the range e). On success, *endp is the
 * line's end (the "\n" or e). On failure, *endp is where the match failed (still inside the line). */
static int match_coll(const unsigned char *p, const unsigned char *e, Coll *m, const unsigned char **endp) {
    m->head = p;
    if (!run(&p, e, C_HOST) || !lit(&p, e, LIT(":"))) goto fail;
    if (!run(&p, e, C_DIGIT) || !lit(&p, e, LIT(":"))) goto fail;
    if (!run(&p, e, C_DIGIT) || !lit(&p, e, LIT(" ["))) goto fail;
    if (!run(&p, e, C_DIGIT) || !lit(&p, e, LIT("] NCCL INFO "))) goto fail;
    m->name = p;
    if (p >= e || !(CLS[*p] & C_UPPER)) goto fail;
    p++;
    if (!run(&p, e, C_ALPHA)) goto fail;
    m->head_end = p;
    if (!lit(&p, e, LIT(": opCount "))) goto fail;
    m->op = p;
    if (!run(&p, e, C_HEX)) goto fail;
    m->op_end = p;
    if (!lit(&p, e, LIT(" sendbuff ")) || !nonws(&p, e)) goto fail;
    if (!lit(&p, e, LIT(" recvbuff ")) || !nonws(&p, e)) goto fail;
    if (!lit(&p, e, LIT(" count ")) || !run(&p, e, C_DIGIT)) goto fail;
    if (!lit(&p, e, LIT(" datatype ")) || !run(&p, e, C_DIGIT)) goto fail;
    if (!lit(&p, e, LIT(" op ")) || !run(&p, e, C_DIGIT)) goto fail;
    if (!lit(&p, e, LIT(" root "))) goto fail;
    if (p < e && *p == '-') p++;
    if (!run(&p, e, C_DIGIT)) goto fail;
    if (!lit(&p, e, LIT(" comm "))) goto fail;
    m->comm = p;
    if (!lit(&p, e, LIT("0x")) || !run(&p, e, C_HEX)) goto fail;
    if (!lit(&p, e, LIT(" [nranks=")) || !run(&p, e, C_DIGIT) || !lit(&p, e, LIT("]"))) goto fail;
    m->comm_end = p;
    if (!lit(&p, e, LIT(" stream "))) goto fail;
    if (lit(&p, e, LIT("0x"))) {
        if (!run(&p, e, C_HEX)) goto fail;
    } else if (!lit(&p, e, LIT("(nil)"))) {
        goto fail;
    }
    if (p < e && *p == '\r') p++;
    if (p < e && *p != '\n') goto fail;
    *endp = p;
    return 1;
fail:
    *endp = p;
    return 0;
}

static inline uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n) {
    /* FNV-1a, 8 bytes at a time folded (keys are ~60 bytes; collisions only cost a memcmp) */
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    while (n--) h = (h ^ *p++) * 0x100000001b3ULL;
    return h;
}

static int table_grow(Table *t) {
    size_t ncap = (t->mask + 1) * 2;
    Py_ssize_t *slots = calloc(ncap, sizeof(Py_ssize_t));
    if (!slots) return -1;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        size_t j = t->entries[i].hash & (ncap - 1);
        while (slots[j]) j = (j + 1) & (ncap - 1);
        slots[j] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = ncap - 1;
    return 0;
}

static int add_coll(Table *t, const Coll *m, Py_ssize_t idx) {
    size_t hl = m->head_end - m->head, cl = m->comm_end - m->comm;
    uint64_t h = hash_bytes(hash_bytes(0xcbf29ce484222325ULL ^ hl, m->head, hl), m->comm, cl);
    size_t j = h & t->mask;
    Py_ssize_t s;
    while ((s = t->slots[j]) != 0) {
        Entry *en = &t->entries[s - 1];
        if (en->hash == h && (size_t)en->head_len == hl && (size_t)en->comm_len == cl
            && eq(t->buf + en->head, m->head, hl) && eq(t->buf + en->comm, m->comm, cl)) {
            en->count++;
            en->last_idx = idx;
            en->op = m->op - t->buf;
            en->op_len = m->op_end - m->op;
            return 0;
        }
        j = (j + 1) & t->mask;
    }
    if (t->n == t->cap) {
        Py_ssize_t ncap = t->cap ? t->cap * 2 : 256;
        Entry *ne = realloc(t->entries, ncap * sizeof(Entry));
        if (!ne) return -1;
        t->entries = ne;
        t->cap = ncap;
    }
    Entry *en = &t->entries[t->n];
    en->head = m->head - t->buf;
    en->head_len = hl;
    en->comm = m->comm - t->buf;
    en->comm_len = cl;
    en->op = m->op - t->buf;
    en->op_len = m->op_end - m->op;
    en->name_len = m->head_end - m->name;
    en->last_idx = idx;
    en->count = 1;
    en->hash = h;
    t->slots[j] = ++t->n;
    if ((size_t)t->n * 2 > t->mask) return table_grow(t);
    return 0;
}

static int add_other(Table *t, Py_ssize_t s, Py_ssize_t e, Py_ssize_t idx) {
    if (t->nother + 3 > t->capother) {
        Py_ssize_t ncap = t->capother ? t->capother * 2 : 3 * 1024;
        Py_ssize_t *no = realloc(t->other, ncap * sizeof(Py_ssize_t));
        if (!no) return -1;
        t->other = no;
        t->capother = ncap;
    }
    t->other[t->nother++] = s;
    t->other[t->nother++] = e;
    t->other[t->nother++] = idx;
    return 0;
}

static int contains(const unsigned char *s, const unsigned char *e, const char *w, size_t n) {
    while ((size_t)(e - s) >= n) {
        const unsigned char *q = memchr(s, w[0], (e - s) - n + 1);
        if (!q) return 0;
        if (memcmp(q, w, n) == 0) return 1;
        s = q + 1;
    }
    return 0;
}

static int keep_other(const unsigned char *s, const unsigned char *e) {
    return contains(s, e, LIT("NCCL")) || contains(s, e, LIT("INFO")) || contains(s, e, LIT("WARN"))
           || contains(s, e, LIT("TRACE"));
}

/* Walk the lines; returns the number of lines, or -1 when out of memory. */
static Py_ssize_t walk(Table *t, const unsigned char *buf, Py_ssize_t start, Py_ssize_t stop) {
    const unsigned char *p = buf + start, *e = buf + stop;
    Py_ssize_t idx = 0, prev = -2;
    for (;;) {
        Coll m;
        const unsigned char *q, *le;
        if (match_coll(p, e, &m, &q)) {
            le = q;
            if (add_coll(t, &m, idx) < 0) return -1;
        } else {
            le = memchr(q, '\n', e - q);
            if (!le) le = e;
            if (idx == prev + 1 || idx == 0 || keep_other(p, le)) {
                if (add_other(t, p - buf, le - buf, idx) < 0) return -1;
                prev = idx;
            }
        }
        idx++;
        if (le >= e) break;
        p = le + 1;
    }
    return idx;
}

#define bytes_at(off, n) PyBytes_FromStringAndSize((const char *)t->buf + (off), (n))

static PyObject *build(Table *t, Py_ssize_t nlines) {
    PyObject *coll = NULL, *lasts = NULL, *other = NULL, *res = NULL;
    if (!(coll = PyDict_New()) || !(lasts = PyDict_New()) || !(other = PyList_New(0)))
        goto done;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        Entry *en = &t->entries[i];
        PyObject *head = bytes_at(en->head, en->head_len);
        PyObject *comm = head ? bytes_at(en->comm, en->comm_len) : NULL;
        PyObject *key = comm ? PyTuple_Pack(2, head, comm) : NULL;
        PyObject *n = key ? PyLong_FromSsize_t(en->count) : NULL;
        int ok = n && PyDict_SetItem(coll, key, n) == 0;
        Py_XDECREF(n);
        Py_XDECREF(key);
        Py_XDECREF(head);
        PyObject *prefix = NULL, *lkey = NULL, *val = NULL, *old;
        if (ok) {
            /* head = prefix + " NCCL INFO " + name */
            prefix = bytes_at(en->head, en->head_len - en->name_len - 11);
            lkey = prefix ? PyTuple_Pack(2, prefix, comm) : NULL;
            ok = lkey != NULL;
        }
        if (ok) {
            /* several heads (collective names) share a (prefix, comm): keep the latest line's */
            old = PyDict_GetItemWithError(lasts, lkey);
            if (!old && PyErr_Occurred()) ok = 0;
            else if (!old || PyLong_AsSsize_t(PyTuple_GET_ITEM(old, 0)) < en->last_idx) {
                PyObject *ix = PyLong_FromSsize_t(en->last_idx);
                PyObject *op = ix ? bytes_at(en->op, en->op_len) : NULL;
                PyObject *name = op ? bytes_at(en->head + en->head_len - en->name_len, en->name_len) : NULL;
                val = name ? PyTuple_Pack(3, ix, op, name) : NULL;
                ok = val && PyDict_SetItem(lasts, lkey, val) == 0;
                Py_XDECREF(ix);
                Py_XDECREF(op);
                Py_XDECREF(name);
            }
        }
        Py_XDECREF(val);
        Py_XDECREF(lkey);
        Py_XDECREF(prefix);
        Py_XDECREF(comm);
        if (!ok) goto done;
    }
    for (Py_ssize_t i = 0; i < t->nother; i += 3) {
        PyObject *item = Py_BuildValue("(nN)", t->other[i + 2], bytes_at(t->other[i], t->other[i + 1] - t->other[i]));
        if (!item) goto done;
        int r = PyList_Append(other, item);
        Py_DECREF(item);
        if (r < 0) goto done;
    }
    res = Py_BuildValue("(nOOO)", nlines, coll, lasts, other);
done:
    Py_XDECREF(coll);
    Py_XDECREF(lasts);
    Py_XDECREF(other);
    return res;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *obj, *res = NULL;
    Py_ssize_t start, stop, nlines;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Onn:scan", &obj, &start, &stop)) return NULL;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (start < 0 || stop > view.len || start > stop) {
        PyErr_SetString(PyExc_ValueError, "scan: need 0 <= start <= stop <= len(buffer)");
        goto out;
    }
    const unsigned char *buf = view.buf;
    if (stop > start && buf[stop - 1] == '\n') stop--;  /* the range's last newline ends its last line */
    Table t = {0};
    t.slots = calloc(1024, sizeof(Py_ssize_t));
    t.mask = 1023;
    if (!t.slots) {
        PyErr_NoMemory();
        goto out;
    }
    t.buf = buf;
    Py_BEGIN_ALLOW_THREADS
    nlines = walk(&t, buf, start, stop);
    Py_END_ALLOW_THREADS
    if (nlines < 0) PyErr_NoMemory();
    else res = build(&t, nlines);
    free(t.slots);
    free(t.entries);
    free(t.other);
out:
    PyBuffer_Release(&view);
    return res;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buffer, start, stop) -> (nlines, coll, lasts, other): the standard collective lines of\n"
     "buffer[start:stop] aggregated per (head, comm), the other lines kept for the per-line parser\n"
     "(see hangdbg.evidence.nccl.grammar._scan_chunk)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "hangdbg.evidence.nccl._cscan",
                                    "C scan of standard NCCL collective lines (optional accelerator).", -1, methods};

PyMODINIT_FUNC PyInit__cscan(void) {
    init_classes();
    return PyModule_Create(&module);
}
