/* hangdbg.evidence.nccl._cscan: the hot loop of hangdbg.evidence.nccl.scan._scan_chunk in C (optional accelerator).
 *
 * scan(buffer, start, stop) -> (nlines, coll, lasts, other)
 *
 * The lines are buffer[start:stop].split(b"\n") after one trailing newline of the range is dropped
 * (exactly the lines _FAST.findall sees in _scan_chunk_py). A line is a standard collective record
 * when it matches the first alternative of _FAST in hangdbg/evidence/nccl/scan.py (NCCL_DEBUG_SUBSYS=COLL
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
 * merge(coll, lasts, src_coll, src_lasts, first): adds one chunk's result to the running totals of
 * scan._merge (coll[k] += n; lasts[k] = (first + index, op, name)) without a Python loop per key.
 *
 * Python objects are made once per distinct key, not per line. Most lines are told apart from the
 * last one of the same shape (the line cache below), the others matched field by field (match_coll,
 * runs of a class found 16 bytes at a time with SSE2, part of x86-64, where the range has 16 more
 * bytes; a byte at a time elsewhere and on other CPUs, with the same classes) and counted in a hash
 * table whose keys are compared in a packed copy (hot in cache), not in the buffer. The buffer
 * (bytes, bytearray, mmap...) is read in place; the GIL is released during the walk, so threads
 * scan chunks in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) && !defined(HANGDBG_NO_SIMD)  /* -DHANGDBG_NO_SIMD: the portable path, for tests */
#include <emmintrin.h>
#define HAVE_SSE2 1
#endif

#define INLINE_KEY 80
typedef struct {
    uint64_t hash;
    uint32_t head_len, comm_len;
    unsigned char k[INLINE_KEY];  /* the first bytes of head + comm, next to the fields (one miss, not two) */
    Py_ssize_t count;
    Py_ssize_t last_idx;
    Py_ssize_t op, op_len;  /* opCount of the last line: offset into the buffer */
    Py_ssize_t key;         /* offset of head + comm in the key arena */
    uint32_t name_len;      /* Name is the end of head */
} Entry;

typedef struct {
    Entry *entries;
    Py_ssize_t n, cap;
    uint32_t *slots;  /* index + 1, 0 = empty */
    size_t mask;
    Py_ssize_t *other;  /* line start, line end, line index: triples */
    Py_ssize_t nother, capother;
    unsigned char *keys;  /* head + comm of every entry, packed */
    Py_ssize_t nkeys, capkeys;
    const unsigned char *buf;
    struct CLine *cache;  /* (cache_mask + 1) * CL_WAYS lines seen last (walk), NULL: no cache */
    unsigned char *victim;  /* per set: the way replaced next */
    size_t cache_mask;
} Table;

/* byte classes */
#define C_WS 1     /* \s of a bytes pattern: [ \t\n\r\f\v] */
#define C_HOST 2   /* [^\s:\[\]()<>\x1c-\x1f\x80-\xff] */
#define C_DIGIT 4
#define C_HEX 8
#define C_UPPER 16
#define C_ALPHA 32
#define C_NONWS 64  /* \S */
static unsigned char CLS[256];

static void init_classes(void) {
    for (int c = 0; c < 256; c++) {
        unsigned char k = 0;
        int ws = (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v');
        if (ws) k |= C_WS;
        else k |= C_NONWS;
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

/* n bytes equal; inlined word compares, the last word read overlapping (n is a constant for the
 * literals: a few loads, no byte loop; libc memcmp calls were a quarter of the time) */
INLINE uint64_t ld64(const unsigned char *p) { uint64_t w; memcpy(&w, p, 8); return w; }
INLINE uint32_t ld32(const unsigned char *p) { uint32_t w; memcpy(&w, p, 4); return w; }
INLINE uint16_t ld16(const unsigned char *p) { uint16_t w; memcpy(&w, p, 2); return w; }
INLINE int eq(const unsigned char *p, const unsigned char *s, size_t n) {
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (ld64(p + i) != ld64(s + i)) return 0;
        return ld64(p + n - 8) == ld64(s + n - 8);
    }
    if (n >= 4) return ld32(p) == ld32(s) && ld32(p + n - 4) == ld32(s + n - 4);
    if (n >= 2) return ld16(p) == ld16(s) && ld16(p + n - 2) == ld16(s + n - 2);
    return n == 0 || *p == *s;
}

INLINE int lit(const unsigned char **p, const unsigned char *e, const char *s, size_t n) {
    if ((size_t)(e - *p) < n || !eq(*p, (const unsigned char *)s, n)) return 0;
    *p += n;
    return 1;
}

/* --- runs of one class: the end of the run starting at p (p itself when it is empty) ----------- */
#ifdef HAVE_SSE2
#define V(x) _mm_set1_epi8((char)(x))
/* bytes of x in [lo, lo + n] (unsigned), as a vector of 0xff/0 */
INLINE __m128i in_range(__m128i x, int lo, int n) {
    __m128i y = _mm_sub_epi8(x, V(lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(y, V(n)), y);
}
INLINE unsigned mask_digit(__m128i x) { return (unsigned)_mm_movemask_epi8(in_range(x, '0', 9)); }
INLINE unsigned mask_hex(__m128i x) {
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(in_range(x, '0', 9), in_range(_mm_or_si128(x, V(0x20)), 'a', 5)));
}
INLINE unsigned mask_alpha(__m128i x) { return (unsigned)_mm_movemask_epi8(in_range(_mm_or_si128(x, V(0x20)), 'a', 25)); }
INLINE unsigned mask_nonws(__m128i x) {
    __m128i ws = _mm_or_si128(in_range(x, '\t', 4), _mm_cmpeq_epi8(x, V(' ')));
    return ~(unsigned)_mm_movemask_epi8(ws) & 0xffff;
}
INLINE unsigned mask_host(__m128i x) {
    __m128i bad = _mm_or_si128(in_range(x, '\t', 4), in_range(x, 0x1c, 4));  /* \t-\r, \x1c-\x1f, space */
    bad = _mm_or_si128(bad, in_range(x, '(', 1));                                /* ( ) */
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, V(':')));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, V('<')));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, V('>')));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, V('[')));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, V(']')));
    /* movemask's sign bits: bytes >= 0x80 */
    return ~((unsigned)_mm_movemask_epi8(bad) | (unsigned)_mm_movemask_epi8(x)) & 0xffff;
}
#define RUN_FN(name, maskfn, cls)                                                             \
    INLINE const unsigned char *name(const unsigned char *p, const unsigned char *e) {        \
        while (e - p >= 16) {                                                                 \
            unsigned m = ~maskfn(_mm_loadu_si128((const __m128i *)p)) & 0xffff;               \
            if (m) return p + __builtin_ctz(m);                                               \
            p += 16;                                                                          \
        }                                                                                     \
        while (p < e && (CLS[*p] & (cls))) p++;                                               \
        return p;                                                                             \
    }
#else
#define RUN_FN(name, maskfn, cls)                                                             \
    INLINE const unsigned char *name(const unsigned char *p, const unsigned char *e) {        \
        while (p < e && (CLS[*p] & (cls))) p++;                                               \
        return p;                                                                             \
    }
#endif
RUN_FN(run_digit, mask_digit, C_DIGIT)
RUN_FN(run_hex, mask_hex, C_HEX)
RUN_FN(run_alpha, mask_alpha, C_ALPHA)
RUN_FN(run_host, mask_host, C_HOST)
#ifdef HAVE_SSE2
INLINE const unsigned char *run_nonws(const unsigned char *p, const unsigned char *e) {
    while (e - p >= 16) {
        unsigned m = ~mask_nonws(_mm_loadu_si128((const __m128i *)p)) & 0xffff;
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
    while (p < e && !(CLS[*p] & C_WS)) p++;
    return p;
}
#else
INLINE const unsigned char *run_nonws(const unsigned char *p, const unsigned char *e) {
    while (p < e && !(CLS[*p] & C_WS)) p++;
    return p;
}
#endif

/* one or more bytes of a class: advance *p, 0 when the run is empty */
#define RUN1(fn, p, e) ((q = fn(p, e)) != p ? (p = q, 1) : 0)

/* the fields of a collective line that vary from one operation to the next (not the key) */
enum { F_SEND, F_RECV, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_STREAM, NFIELDS };
static const unsigned char FIELD_CLS[NFIELDS] = {C_NONWS, C_NONWS, C_DIGIT, C_DIGIT, C_DIGIT, C_DIGIT, C_HEX};

typedef struct {
    const unsigned char *head, *name, *head_end, *op, *op_end, *comm, *comm_end;
    const unsigned char *f[NFIELDS][2];  /* [start, end) of each field; the stream's empty when it is (nil) */
} Coll;

/* Match the collective record at p (bytes up to the end of the range e). On success, *endp is the
 * line's end (the "\n" or e). On failure, *endp is where the match failed (still inside the line). */
static int match_coll(const unsigned char *p, const unsigned char *e, Coll *m, const unsigned char **endp) {
    const unsigned char *q;
    m->head = p;
    if (!RUN1(run_host, p, e) || !lit(&p, e, LIT(":"))) goto fail;
    if (!RUN1(run_digit, p, e) || !lit(&p, e, LIT(":"))) goto fail;
    if (!RUN1(run_digit, p, e) || !lit(&p, e, LIT(" ["))) goto fail;
    if (!RUN1(run_digit, p, e) || !lit(&p, e, LIT("] NCCL INFO "))) goto fail;
    m->name = p;
    if (p >= e || !(CLS[*p] & C_UPPER)) goto fail;
    p++;
    if (!RUN1(run_alpha, p, e)) goto fail;
    m->head_end = p;
    if (!lit(&p, e, LIT(": opCount "))) goto fail;
    m->op = p;
    if (!RUN1(run_hex, p, e)) goto fail;
    m->op_end = p;
#define FIELD(i, fn) (m->f[i][0] = p, RUN1(fn, p, e) ? (m->f[i][1] = p, 1) : 0)
    if (!lit(&p, e, LIT(" sendbuff ")) || !FIELD(F_SEND, run_nonws)) goto fail;
    if (!lit(&p, e, LIT(" recvbuff ")) || !FIELD(F_RECV, run_nonws)) goto fail;
    if (!lit(&p, e, LIT(" count ")) || !FIELD(F_COUNT, run_digit)) goto fail;
    if (!lit(&p, e, LIT(" datatype ")) || !FIELD(F_DTYPE, run_digit)) goto fail;
    if (!lit(&p, e, LIT(" op ")) || !FIELD(F_OP, run_digit)) goto fail;
    if (!lit(&p, e, LIT(" root "))) goto fail;
    if (p < e && *p == '-') p++;
    if (!FIELD(F_ROOT, run_digit)) goto fail;
    if (!lit(&p, e, LIT(" comm "))) goto fail;
    m->comm = p;
    if (!lit(&p, e, LIT("0x")) || !RUN1(run_hex, p, e)) goto fail;
    if (!lit(&p, e, LIT(" [nranks=")) || !RUN1(run_digit, p, e) || !lit(&p, e, LIT("]"))) goto fail;
    m->comm_end = p;
    if (!lit(&p, e, LIT(" stream "))) goto fail;
    if (lit(&p, e, LIT("0x"))) {
        if (!FIELD(F_STREAM, run_hex)) goto fail;
    } else if (lit(&p, e, LIT("(nil)"))) {
        m->f[F_STREAM][0] = m->f[F_STREAM][1] = p;
    } else {
        goto fail;
    }
#undef FIELD
    if (p < e && *p == '\r') p++;
    if (p < e && *p != '\n') goto fail;
    *endp = p;
    return 1;
fail:
    *endp = p;
    return 0;
}

/* Sum of the 8-byte words times odd constants (independent multiplies, no latency chain; the last
 * partial word read overlapping the one before), then a murmur3 finalizer. Keys are ~40-80 bytes;
 * a collision only costs a compare. */
static const uint64_t HK[4] = {0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL, 0x165667b19e3779f9ULL, 0xd6e8feb86659fd93ULL};

INLINE uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n) {
    uint64_t w;
    if (n < 8) {
        w = 0;
        memcpy(&w, p, n);
        return h + (w ^ n) * HK[1];
    }
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h += w * HK[(i >> 3) & 3];
    }
    if (i < n) {
        memcpy(&w, p + n - 8, 8);
        h += (w ^ n) * 0xa0761d6478bd642fULL;
    }
    return h;
}

INLINE uint64_t fmix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static int table_grow(Table *t) {
    size_t ncap = (t->mask + 1) * 2;
    uint32_t *slots = calloc(ncap, sizeof(uint32_t));
    if (!slots) return -1;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        size_t j = t->entries[i].hash & (ncap - 1);
        while (slots[j]) j = (j + 1) & (ncap - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->mask = ncap - 1;
    return 0;
}

/* head + comm equal to the entry's key (its inline copy, then the arena for the rest) */
INLINE int key_eq(const Table *t, const Entry *en, const unsigned char *head, size_t hl, const unsigned char *comm, size_t cl) {
    if (hl + cl <= INLINE_KEY) return eq(en->k, head, hl) && eq(en->k + hl, comm, cl);
    return eq(t->keys + en->key, head, hl) && eq(t->keys + en->key + hl, comm, cl);
}

/* Count a collective line of key (head, comm): the index of its entry, -1 when out of memory. */
static Py_ssize_t add_coll(Table *t, const Coll *m, Py_ssize_t idx) {
    size_t hl = m->head_end - m->head, cl = m->comm_end - m->comm;
    uint64_t h = fmix(hash_bytes(hash_bytes(hl, m->head, hl) * 0x100000001b3ULL, m->comm, cl));
    size_t j = h & t->mask;
    uint32_t s;
    while ((s = t->slots[j]) != 0) {
        Entry *en = &t->entries[s - 1];
        if (en->hash == h && en->head_len == hl && en->comm_len == cl && key_eq(t, en, m->head, hl, m->comm, cl)) {
            en->count++;
            en->last_idx = idx;
            en->op = m->op - t->buf;
            en->op_len = m->op_end - m->op;
            return s - 1;
        }
        j = (j + 1) & t->mask;
    }
    if (hl + cl > (1u << 30) || t->n >= 0x7fffffff) return -1;
    if (t->n == t->cap) {
        Py_ssize_t ncap = t->cap ? t->cap * 2 : 256;
        Entry *ne = realloc(t->entries, ncap * sizeof(Entry));
        if (!ne) return -1;
        t->entries = ne;
        t->cap = ncap;
    }
    if (t->nkeys + (Py_ssize_t)(hl + cl) > t->capkeys) {
        Py_ssize_t ncap = t->capkeys ? t->capkeys * 2 : 64 * 1024;
        while (ncap < t->nkeys + (Py_ssize_t)(hl + cl)) ncap *= 2;
        unsigned char *nk = realloc(t->keys, ncap);
        if (!nk) return -1;
        t->keys = nk;
        t->capkeys = ncap;
    }
    Entry *en = &t->entries[t->n];
    en->key = t->nkeys;
    memcpy(t->keys + t->nkeys, m->head, hl);
    memcpy(t->keys + t->nkeys + hl, m->comm, cl);
    memcpy(en->k, t->keys + t->nkeys, hl + cl < INLINE_KEY ? hl + cl : INLINE_KEY);
    t->nkeys += hl + cl;
    en->head_len = (uint32_t)hl;
    en->comm_len = (uint32_t)cl;
    en->op = m->op - t->buf;
    en->op_len = m->op_end - m->op;
    en->name_len = (uint32_t)(m->head_end - m->name);
    en->last_idx = idx;
    en->count = 1;
    en->hash = h;
    t->slots[j] = (uint32_t)++t->n;
    if ((size_t)t->n * 2 > t->mask && table_grow(t) < 0) return -1;
    return t->n - 1;
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

/* --- the line cache ---------------------------------------------------------------------------
 * A collective line is mostly the same as an earlier one of the same process and communicator:
 * same host:pid:tid, name, comm and literals; other sendbuff, count, opCount... Each line matched
 * in full is remembered (where it is in the buffer, its key's entry, the spans of its variable
 * fields) under a tag of its length, first 16 bytes, name, comm pointer and where its spaces are,
 * in a 4-way set of the cache. A later line with that tag and length whose bytes differ from the
 * remembered line's only inside the variable fields (opCount, sendbuff, recvbuff, count, datatype,
 * op, root, stream), each new byte of its field's class, is a match of the same key: match_coll
 * would accept it with the same spans (each run still stops at the same literal byte after it,
 * which did not change, and the literals, the head and the comm are the same bytes). It is counted
 * without the walk through the fields and without hashing its key. Anything else goes through
 * match_coll (tests/test_nccl_cscan.py changes every byte of a line to hold the two equal). */
#define CL_MIN 48
#define CL_MAX 255   /* offsets in a line fit a byte */
#define CL_SETS 4096 /* of CL_WAYS lines of 56 bytes: 896 KiB; a range under 256 KiB gets 16 sets */
#define CL_WAYS 4

typedef struct {
    unsigned char s, e, cls;  /* [s, e) of the line, its byte class */
} Span;

typedef struct CLine {
    uint64_t tag;  /* cl_tag of the line, 0: empty way */
    const unsigned char *bytes;  /* the line, in the buffer (which outlives the walk) */
    uint32_t entry;  /* the table entry of its key */
    uint16_t len;
    unsigned char op, op_len, nspans;  /* opCount: offset in the line, length */
    Span spans[NFIELDS + 1];  /* the variable fields, in order (opCount first) */
} CLine;

/* The tag of a line (never 0): its length, first 16 bytes (host:pid:tid), 8 bytes 12 after its first
 * "]" (the start of the collective's name), 16 bytes 48 from its end (the comm pointer) and where
 * its spaces are (the fields' bounds: the lines of a key whose opCount grew by a digit as the count
 * lost one have other tags): the lines of one key and shape have one tag; its set is some of its
 * bits. Any function of the line would be correct (cl_same decides); this one keeps apart what
 * differs between the lines of a job. sp: the spaces, bracket: the first "]" (NULL: none). */
INLINE uint64_t cl_tag(const unsigned char *p, size_t len, uint64_t sp, const unsigned char *bracket) {
    uint64_t h = ld64(p) * HK[0] + ld64(p + 8) * HK[1] + ld64(p + len - 48) * HK[2] + ld64(p + len - 40) * HK[3] + len;
    if (bracket && bracket + 20 <= p + len) h += ld64(bracket + 12) * 0xa0761d6478bd642fULL;
    return fmix(h + sp * 0xe7037ed1a0b428dbULL) | 1;
}

/* the line at p (len bytes, within the range) differs from c only in its fields, with bytes of their class */
INLINE int cl_same(const CLine *c, const unsigned char *p, size_t len, const unsigned char *e) {
    const Span *sp = c->spans, *se = c->spans + c->nspans;
    for (size_t i = 0; i < len; i += 16) {
        unsigned m = 0;
        size_t n = len - i < 16 ? len - i : 16;
#ifdef HAVE_SSE2
        if (e - (p + i) >= 16) {  /* c->bytes is an earlier line of the range: 16 bytes are there too */
            __m128i a = _mm_loadu_si128((const __m128i *)(p + i)), b = _mm_loadu_si128((const __m128i *)(c->bytes + i));
            m = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(a, b)) & ((1u << n) - 1);
        } else
#endif
        {
            for (size_t k = 0; k < n; k++)
                if (p[i + k] != c->bytes[i + k]) m |= 1u << k;
        }
        while (m) {
            size_t x = i + (size_t)__builtin_ctz(m);
            m &= m - 1;
            while (sp < se && sp->e <= x) sp++;
            if (sp == se || x < sp->s || !(CLS[p[x]] & sp->cls)) return 0;
        }
    }
    return 1;
}

static void cl_fill(CLine *c, uint64_t tag, const Coll *m, size_t len, Py_ssize_t entry) {
    const unsigned char *p = m->head;
    c->tag = tag;
    c->len = (uint16_t)len;
    c->entry = (uint32_t)entry;
    c->op = (unsigned char)(m->op - p);
    c->op_len = (unsigned char)(m->op_end - m->op);
    c->spans[0] = (Span){(unsigned char)(m->op - p), (unsigned char)(m->op_end - p), C_HEX};
    unsigned char n = 1;
    for (int i = 0; i < NFIELDS; i++)
        if (m->f[i][1] > m->f[i][0])
            c->spans[n++] = (Span){(unsigned char)(m->f[i][0] - p), (unsigned char)(m->f[i][1] - p), FIELD_CLS[i]};
    c->nspans = n;
    c->bytes = p;
}

#if defined(__GNUC__)
#define PREFETCH(a) __builtin_prefetch((const void *)(a))
#else
#define PREFETCH(a) ((void)0)
#endif

/* A line ahead of the one being counted: the cache set, the remembered line and the entry are far
 * apart in memory, so each line's set is prefetched two lines ahead, its remembered line and entry
 * one line ahead. */
typedef struct {
    const unsigned char *p, *le;  /* [p, le): the line; p NULL: past the end */
    uint64_t tag;                 /* 0: not cached (too short or long, no cache) */
    size_t set;
} Ahead;

INLINE void ahead_at(const Table *t, Ahead *a, const unsigned char *p, const unsigned char *e) {
    a->p = p;
    a->tag = 0;
    uint64_t sp = 0;
    const unsigned char *le = NULL, *bracket = NULL;
#ifdef HAVE_SSE2
    if (t->cache) {  /* one pass for the line's end, its spaces and its first "]" */
        const unsigned char *q = p;
        while (e - q >= 16 && q - p <= CL_MAX) {
            __m128i x = _mm_loadu_si128((const __m128i *)q);
            unsigned nl = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, V('\n')));
            unsigned spaces = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, V(' ')));
            if (!bracket) {
                unsigned br = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, V(']')));
                if (br) bracket = q + __builtin_ctz(br);
            }
            if (nl) {
                unsigned k = (unsigned)__builtin_ctz(nl);
                sp = sp * 0x100000001b3ULL + (spaces & ((1u << k) - 1));
                le = q + k;
                break;
            }
            sp = sp * 0x100000001b3ULL + spaces;
            q += 16;
        }
        if (!le) {  /* a long line, or the end of the range: no tag (not cached) */
            le = memchr(q, '\n', e - q);
            a->le = le ? le : e;
            return;
        }
    } else
#endif
    {
        le = memchr(p, '\n', e - p);
        if (!le) le = e;
    }
    a->le = le;
    size_t len = le - p;
    if (t->cache && len >= CL_MIN && len <= CL_MAX) {
        a->tag = cl_tag(p, len, sp, bracket ? bracket : memchr(p, ']', len));
        a->set = (size_t)(a->tag >> 40) & t->cache_mask;
        const char *w = (const char *)&t->cache[a->set * CL_WAYS];
        for (size_t k = 0; k < CL_WAYS * sizeof(CLine); k += 64) PREFETCH(w + k);
    }
}

INLINE void ahead_next(const Table *t, Ahead *a, const Ahead *before, const unsigned char *e) {
    if (before->p && before->le < e) ahead_at(t, a, before->le + 1, e);
    else a->p = NULL;
}

INLINE void ahead_fetch(const Table *t, const Ahead *a) {
    if (!a->p || !a->tag) return;
    const CLine *ways = &t->cache[a->set * CL_WAYS];
    for (int w = 0; w < CL_WAYS; w++) {
        if (ways[w].tag == a->tag) {
            const unsigned char *b = ways[w].bytes;
            for (size_t k = 0; k < ways[w].len; k += 64) PREFETCH(b + k);
            PREFETCH(b + ways[w].len - 1);
            PREFETCH(&t->entries[ways[w].entry]);
            return;
        }
    }
}

/* Walk the lines; returns the number of lines, or -1 when out of memory. */
static Py_ssize_t walk(Table *t, const unsigned char *buf, Py_ssize_t start, Py_ssize_t stop) {
    const unsigned char *e = buf + stop;
    Py_ssize_t idx = 0, prev = -2;
    Ahead ring[3];
    ahead_at(t, &ring[0], buf + start, e);
    ahead_next(t, &ring[1], &ring[0], e);
    for (;;) {
        Ahead *cur = &ring[idx % 3], *n1 = &ring[(idx + 1) % 3], *n2 = &ring[(idx + 2) % 3];
        ahead_next(t, n2, n1, e);
        ahead_fetch(t, n1);
        Coll m;
        const unsigned char *p = cur->p, *le = cur->le, *q;
        size_t len = le - p;
        CLine *way = NULL;  /* where a line matched in full is kept */
        if (cur->tag) {
            CLine *ways = &t->cache[cur->set * CL_WAYS];
            for (int w = 0; w < CL_WAYS; w++) {
                CLine *c = &ways[w];
                if (c->tag != cur->tag) continue;
                if (c->len == len && cl_same(c, p, len, e)) {
                    Entry *en = &t->entries[c->entry];
                    en->count++;
                    en->last_idx = idx;
                    en->op = (p - buf) + c->op;
                    en->op_len = c->op_len;
                    goto next;
                }
                way = c;  /* the same tag, other bytes: this line replaces it */
            }
            if (!way) {
                way = &ways[t->victim[cur->set]];
                t->victim[cur->set] = (t->victim[cur->set] + 1) % CL_WAYS;
            }
        }
        if (match_coll(p, e, &m, &q)) {
            Py_ssize_t entry = add_coll(t, &m, idx);
            if (entry < 0) return -1;
            if (way) cl_fill(way, cur->tag, &m, len, entry);
        } else if (idx == prev + 1 || idx == 0 || keep_other(p, le)) {
            if (add_other(t, p - buf, le - buf, idx) < 0) return -1;
            prev = idx;
        }
    next:
        idx++;
        if (le >= e) break;
    }
    return idx;
}

#define bytes_at(off, n) PyBytes_FromStringAndSize((const char *)t->buf + (off), (n))
#define key_at(off, n) PyBytes_FromStringAndSize((const char *)t->keys + (off), (n))

static PyObject *build(Table *t, Py_ssize_t nlines) {
    PyObject *coll = NULL, *lasts = NULL, *other = NULL, *res = NULL;
    if (!(coll = PyDict_New()) || !(lasts = PyDict_New()) || !(other = PyList_New(0)))
        goto done;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        Entry *en = &t->entries[i];
        PyObject *head = key_at(en->key, en->head_len);
        PyObject *comm = head ? key_at(en->key + en->head_len, en->comm_len) : NULL;
        PyObject *key = comm ? PyTuple_Pack(2, head, comm) : NULL;
        PyObject *n = key ? PyLong_FromSsize_t(en->count) : NULL;
        int ok = n && PyDict_SetItem(coll, key, n) == 0;
        Py_XDECREF(n);
        Py_XDECREF(key);
        Py_XDECREF(head);
        PyObject *prefix = NULL, *lkey = NULL, *val = NULL, *old;
        if (ok) {
            /* head = prefix + " NCCL INFO " + name */
            prefix = key_at(en->key, en->head_len - en->name_len - 11);
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
                PyObject *name = op ? key_at(en->key + en->head_len - en->name_len, en->name_len) : NULL;
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
    t.slots = calloc(1024, sizeof(uint32_t));
    t.mask = 1023;
    if (!t.slots) {
        PyErr_NoMemory();
        goto out;
    }
    t.buf = buf;
    t.cache_mask = stop - start >= 256 * 1024 ? CL_SETS - 1 : 15;
    t.cache = calloc((t.cache_mask + 1) * CL_WAYS, sizeof(CLine));
    t.victim = calloc(t.cache_mask + 1, 1);
    if (!t.cache || !t.victim) {  /* no cache: slower, same result */
        free(t.cache);
        free(t.victim);
        t.cache = NULL;
        t.victim = NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    nlines = walk(&t, buf, start, stop);
    Py_END_ALLOW_THREADS
    if (nlines < 0) PyErr_NoMemory();
    else res = build(&t, nlines);
    free(t.slots);
    free(t.entries);
    free(t.other);
    free(t.keys);
    free(t.cache);
    free(t.victim);
out:
    PyBuffer_Release(&view);
    return res;
}

static PyObject *merge(PyObject *self, PyObject *args) {
    PyObject *coll, *lasts, *src_coll, *src_lasts, *key, *val;
    Py_ssize_t first, pos = 0;
    if (!PyArg_ParseTuple(args, "O!O!O!O!n:merge", &PyDict_Type, &coll, &PyDict_Type, &lasts, &PyDict_Type, &src_coll,
                          &PyDict_Type, &src_lasts, &first))
        return NULL;
    while (PyDict_Next(src_coll, &pos, &key, &val)) {
        PyObject *old = PyDict_GetItemWithError(coll, key), *sum;
        if (!old && PyErr_Occurred()) return NULL;
        sum = old ? PyNumber_Add(old, val) : (Py_INCREF(val), val);
        if (!sum) return NULL;
        int r = PyDict_SetItem(coll, key, sum);
        Py_DECREF(sum);
        if (r < 0) return NULL;
    }
    pos = 0;
    while (PyDict_Next(src_lasts, &pos, &key, &val)) {
        if (!PyTuple_Check(val) || PyTuple_GET_SIZE(val) != 3) {
            PyErr_SetString(PyExc_TypeError, "merge: lasts values are (index, op, name)");
            return NULL;
        }
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(val, 0));
        if (i == -1 && PyErr_Occurred()) return NULL;
        PyObject *nv = Py_BuildValue("(nOO)", first + i, PyTuple_GET_ITEM(val, 1), PyTuple_GET_ITEM(val, 2));
        if (!nv) return NULL;
        int r = PyDict_SetItem(lasts, key, nv);
        Py_DECREF(nv);
        if (r < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buffer, start, stop) -> (nlines, coll, lasts, other): the standard collective lines of\n"
     "buffer[start:stop] aggregated per (head, comm), the other lines kept for the per-line parser\n"
     "(see hangdbg.evidence.nccl.scan._scan_chunk)."},
    {"merge", merge, METH_VARARGS,
     "merge(coll, lasts, src_coll, src_lasts, first): coll[k] += src_coll[k] for each key; lasts[k] =\n"
     "(first + index, op, name) for each (index, op, name) of src_lasts (see hangdbg.evidence.nccl.scan._merge)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "hangdbg.evidence.nccl._cscan",
                                    "C scan of standard NCCL collective lines (optional accelerator).", -1, methods};

PyMODINIT_FUNC PyInit__cscan(void) {
    init_classes();
    return PyModule_Create(&module);
}
