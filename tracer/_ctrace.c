/* tracer._ctrace: a C-level trace function for NicerTrace on CPython 3.11.
 *
 * Optional: tracer/core.py uses it when it imports, else the pure-Python sys.settrace path
 * (and on 3.12+ sys.monitoring, which needs no C). CPython 3.11 C API only; built by setup.py
 * with optional=True, so a machine without a compiler still installs the package.
 *
 * Two parts:
 *
 * 1. ctrace(), the thread's trace function (PyEval_SetTrace, Include/cpython/ceval.h). On
 *    PyTrace_CALL it looks at the code object's decision, cached in the code object's "extra"
 *    slot (PEP 523 _PyCode_GetExtra/_PyCode_SetExtra: an index lookup, where a dict lookup
 *    would hash the code object, ~70 ns on 3.11 because code objects do not cache their hash):
 *      excluded -> turn off line events for the frame (f_trace_lines = 0, back to 1 at its
 *                  return event) and return 0: no Python call, nothing written;
 *      unknown  -> look in the Python tracer's per-code-object dict (NicerTrace._cache), and if
 *                  it is not there call the Python decide(code, frame globals) once; cache it;
 *      included -> behave like CPython 3.11's own sys.settrace trampoline (Python/sysmodule.c
 *                  trace_trampoline/call_trampoline): call the Python global trace function
 *                  with (frame, "call", arg) and keep a non-None result as frame.f_trace.
 *    Other events go to frame.f_trace (the frame's local trace function), as in CPython. One
 *    difference from the trampoline: no PyFrame_FastToLocals/LocalsToFast around the call (the
 *    tracer's functions never read or write frame.f_locals; reading f_locals syncs it anyway).
 *
 * 2. eval_hook(), a PEP 523 frame-evaluation hook, because on 3.11 a trace function alone
 *    cannot make excluded code cheap: with any trace function set, every frame of the thread
 *    runs in the interpreter's tracing mode (see the comment at eval_hook). The hook runs the
 *    frames of excluded code with tracing mode off, so they cost nearly nothing, and every other
 *    frame with it on. Not taken when another hook is installed (TorchDynamo's, a debugger's):
 *    then tracing is still correct, excluded code just runs in tracing mode.
 *
 * A CTracer object is also callable as a Python trace function (frame, event, arg): that is how
 * threading.settrace() (which calls sys.settrace(hook) in each new thread) and a
 * sys.settrace(sys.gettrace()) round trip put the C function back. After disable() every
 * thread still running it removes it at its next event.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if !defined(PYPY_VERSION) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* struct _frame (f_trace, f_trace_lines) and _PyInterpreterFrame (f_code) are only defined in
 * the internal header in 3.11, as CPython's own trampoline in sysmodule.c uses them. */
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include "internal/pycore_frame.h"
#else
#error "tracer._ctrace is for CPython 3.11 (3.12+ uses sys.monitoring, older Pythons the pure-Python path)"
#endif

#include <stdint.h>

#define STATE_UNKNOWN 0
#define STATE_EXCLUDED 1
#define STATE_INCLUDED 2

static Py_ssize_t extra_index = -1;     /* our slot in every code object's co_extra */
static uintptr_t next_generation = 1;   /* one per CTracer: a decision cached by an earlier
                                           tracer (other options) is not this one's */
static PyObject *whatstrings[8];        /* "call", "exception", ... indexed by PyTrace_* */

typedef struct {
    PyObject_HEAD
    PyObject *cache;      /* dict: code object -> entry (traced) or None (excluded) */
    PyObject *decide;     /* decide(code, globals) -> entry or None; stores it in cache */
    PyObject *pyfunc;     /* the Python global trace function for included code */
    uintptr_t generation;
    int enabled;
    int want_hook;        /* run excluded frames untraced through the PEP 523 frame hook */
    int hooked;           /* this tracer holds a reference on the frame hook */
    unsigned long long excluded_calls;  /* call events answered in C (excluded code) */
    unsigned long long traced_calls;    /* call events passed to the Python global function */
    unsigned long long decisions;       /* decide() calls */
    unsigned long long untraced_frames; /* frames of excluded code run untraced by the hook */
} CTracer;

static PyTypeObject CTracer_Type;

/* The decision cached in the code object for this tracer, or STATE_UNKNOWN. */
static inline int
cached_state(CTracer *self, PyCodeObject *code)
{
    void *extra = NULL;
    if (_PyCode_GetExtra((PyObject *)code, extra_index, &extra) < 0) {
        PyErr_Clear();
        return STATE_UNKNOWN;
    }
    uintptr_t v = (uintptr_t)extra;
    return ((v >> 2) == self->generation) ? (int)(v & 3) : STATE_UNKNOWN;
}

static int ctrace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);

/* ------------------------------------------------------------------ the PEP 523 frame hook
 * On 3.11 a thread with a trace function runs *every* frame in the interpreter's tracing mode
 * (tstate->cframe->use_tracing = 255: each instruction goes through DO_TRACING, unspecialised,
 * with a line-number lookup), whatever the trace function answers: that alone roughly doubles
 * the time of excluded code. The frame-evaluation hook (PEP 523,
 * _PyInterpreterState_SetEvalFrameFunc) sees every frame start (and every generator resume)
 * before it runs; for a code object already known to be excluded it runs the frame with
 * use_tracing = 0, so it runs at full speed and produces no events at all; any other frame
 * (included, or not yet decided) runs with use_tracing = 255 and gets its events as usual.
 * With a hook installed CPython does not inline Python-to-Python calls, so every frame goes
 * through here. use_tracing is copied from the caller's _PyCFrame when
 * _PyEval_EvalFrameDefault starts, so it is set on the caller's and put back after. Threads
 * that do not run a CTracer (or run a profiler, or are inside a trace callback) are passed
 * through untouched. */
static _PyFrameEvalFunction default_eval = NULL;
static int hook_dead = 0;      /* given up (deep recursion) until no tracer holds the hook */
static int code_state_in(CTracer *self, PyObject *code, PyObject *globals);

/* Without the hook CPython 3.11 runs a Python-to-Python call inside the caller's C frame; with
 * it, every call is a C-level recursion of roughly half a KiB of C stack. A program that raised
 * sys.setrecursionlimit and recurses deeper than this would run out of C stack (a segfault at
 * about 17,000 levels with an 8 MiB stack), so past it the hook is removed for the rest of the
 * trace: calls are inlined again, every frame runs in tracing mode, still traced correctly. */
#define HOOK_MAX_DEPTH 3000

static PyObject *eval_hook(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag);

static void
hook_give_up(PyThreadState *tstate)
{
    PyInterpreterState *interp = tstate->interp;
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == eval_hook) {
        _PyInterpreterState_SetEvalFrameFunc(interp, default_eval);
    }
    hook_dead = 1;
    /* Frames of excluded code run with use_tracing = 0 in their C frame: with the hook gone,
     * what they call would inherit that and go untraced. Put every C frame of every thread
     * running a CTracer back in tracing mode (the other threads hold no GIL: their C frames
     * are not in use). */
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t != NULL; t = PyThreadState_Next(t)) {
        if (t->c_tracefunc == ctrace) {
            for (_PyCFrame *c = t->cframe; c != NULL; c = c->previous) {
                c->use_tracing = 255;
            }
        }
    }
}

/* Decide a code object seen for the first time before its frame runs (so that a long-running
 * excluded function called once, e.g. a library's train loop, runs untraced from the start).
 * The Python decide() runs with tracing suspended and any pending exception saved; an error
 * is dropped here (the frame then runs traced, and its call event decides again, raising as
 * CPython's trampoline would). */
static int
hook_decide(PyThreadState *tstate, CTracer *ct, struct _PyInterpreterFrame *frame)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Py_INCREF(ct);
    PyThreadState_EnterTracing(tstate);
    int state = code_state_in(ct, (PyObject *)frame->f_code, frame->f_globals);
    PyThreadState_LeaveTracing(tstate);
    Py_DECREF(ct);
    if (state < 0) {
        PyErr_Clear();
        state = STATE_UNKNOWN;
    }
    PyErr_Restore(type, value, tb);
    return state;
}

static Py_ssize_t hook_users = 0;
static PyInterpreterState *hook_interp = NULL;

static PyObject *
eval_hook(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag)
{
    if (tstate->c_tracefunc != ctrace || tstate->tracing || tstate->c_profilefunc != NULL) {
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    if (tstate->recursion_limit - tstate->recursion_remaining > HOOK_MAX_DEPTH) {
        hook_give_up(tstate);
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    CTracer *ct = (CTracer *)tstate->c_traceobj;
    _PyCFrame *cf = tstate->cframe;
    uint8_t saved = cf->use_tracing;
    int state = ct->enabled ? cached_state(ct, frame->f_code) : STATE_INCLUDED;
    if (state == STATE_UNKNOWN && !throwflag) {
        state = hook_decide(tstate, ct, frame);
    }
    if (state == STATE_EXCLUDED) {
        cf->use_tracing = 0;
        ct->untraced_frames++;
    }
    else {
        cf->use_tracing = 255;
    }
    PyObject *res = _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    if (tstate->c_tracefunc == ctrace && !hook_dead) {
        cf->use_tracing = saved;
    }
    else {
        /* the trace function changed while the frame ran (stop(), sys.settrace), or the hook
         * gave up: what CPython's _PyThreadState_UpdateTracingState would set */
        cf->use_tracing = (tstate->tracing == 0 &&
                           (tstate->c_tracefunc != NULL || tstate->c_profilefunc != NULL)) ? 255 : 0;
    }
    return res;
}

/* Take a reference on the hook: install it if no one else has one. 1 if held, 0 if another
 * frame hook is installed (then tracing still works, every frame in tracing mode). */
static int
hook_acquire(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (hook_dead) {
        return 0;
    }
    if (cur == eval_hook) {
        /* ours already: held by another tracer, or put back by a hook that chained to it
         * (TorchDynamo saves the hook it replaces, calls it for the frames it does not
         * compile, and restores it) after our last tracer had released it */
        hook_interp = interp;
        hook_users++;
        return 1;
    }
    if (cur != _PyEval_EvalFrameDefault) {
        return 0;   /* someone else's hook (e.g. TorchDynamo): leave it alone */
    }
    default_eval = cur;
    hook_interp = interp;
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_hook);
    hook_users = 1;
    return 1;
}

static void
hook_release(void)
{
    if (hook_users <= 0) {
        return;
    }
    if (--hook_users == 0) {
        /* (may run at interpreter shutdown, from a thread state's clear: no
         * PyInterpreterState_Get() here) */
        hook_dead = 0;
        if (_PyInterpreterState_GetEvalFrameFunc(hook_interp) == eval_hook) {
            _PyInterpreterState_SetEvalFrameFunc(hook_interp, default_eval);
        }
    }
}

/* The decision for a code object (run with these globals): STATE_EXCLUDED/INCLUDED, or -1
 * with an error. */
static int
code_state_in(CTracer *self, PyObject *code, PyObject *globals)
{
    int known = cached_state(self, (PyCodeObject *)code);
    if (known != STATE_UNKNOWN) {
        return known;
    }
    PyObject *entry = PyDict_GetItemWithError(self->cache, code);   /* borrowed */
    if (entry == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        PyObject *args[2] = {code, globals != NULL ? globals : Py_None};
        entry = PyObject_Vectorcall(self->decide, args, 2, NULL);
        if (entry == NULL) {
            return -1;
        }
        self->decisions++;
        Py_DECREF(entry);   /* the cache dict holds it */
    }
    int state = (entry == Py_None) ? STATE_EXCLUDED : STATE_INCLUDED;
    if (_PyCode_SetExtra(code, extra_index, (void *)((self->generation << 2) | (uintptr_t)state)) < 0) {
        return -1;
    }
    return state;
}

static inline int
code_state(CTracer *self, PyFrameObject *frame)
{
    return code_state_in(self, (PyObject *)frame->f_frame->f_code, frame->f_frame->f_globals);
}

/* The Py_tracefunc installed with PyEval_SetTrace. */
static int
ctrace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    CTracer *self = (CTracer *)obj;
    PyObject *callback;

    if (!self->enabled) {
        /* stopped (in another thread): take ourselves off this thread. This may free self. */
        PyEval_SetTrace(NULL, NULL);
        return 0;
    }
    if (what == PyTrace_CALL) {
        int state = code_state(self, frame);
        if (state < 0) {
            goto error;
        }
        if (state == STATE_EXCLUDED) {
            self->excluded_calls++;
            frame->f_trace_lines = 0;   /* no line events for excluded frames */
            return 0;
        }
        self->traced_calls++;
        callback = self->pyfunc;
    }
    else {
        callback = frame->f_trace;
        if (callback == NULL) {
            if (what == PyTrace_RETURN) {
                /* leaving (or a generator suspending): put the default back, so no frame
                 * outlives its call with line events off (running frames: see core.py) */
                frame->f_trace_lines = 1;
            }
            return 0;
        }
    }
    if (what < 0 || what > PyTrace_OPCODE) {
        return 0;
    }
    PyObject *args[3] = {(PyObject *)frame, whatstrings[what], arg != NULL ? arg : Py_None};
    Py_INCREF(callback);    /* the callback may replace frame.f_trace while it runs */
    PyObject *result = PyObject_Vectorcall(callback, args, 3, NULL);
    Py_DECREF(callback);
    if (result == NULL) {
        PyTraceBack_Here(frame);
        goto error;
    }
    if (result != Py_None) {
        Py_XSETREF(frame->f_trace, result);
    }
    else {
        Py_DECREF(result);
    }
    return 0;

error:
    /* as CPython's trampoline: tracing stops in this thread, the exception propagates */
    PyEval_SetTrace(NULL, NULL);
    Py_CLEAR(frame->f_trace);
    return -1;
}

/* ------------------------------------------------------------------------- the Python type */

static int
CTracer_init(CTracer *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"cache", "decide", "pyfunc", "frame_hook", NULL};
    PyObject *cache, *decide, *pyfunc;
    int frame_hook = 1;
    if (self->cache != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "CTracer already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO|p:CTracer", kwlist,
                                     &PyDict_Type, &cache, &decide, &pyfunc, &frame_hook)) {
        return -1;
    }
    if (!PyCallable_Check(decide) || !PyCallable_Check(pyfunc)) {
        PyErr_SetString(PyExc_TypeError, "CTracer: decide and pyfunc must be callable");
        return -1;
    }
    Py_INCREF(cache);
    Py_XSETREF(self->cache, cache);
    Py_INCREF(decide);
    Py_XSETREF(self->decide, decide);
    Py_INCREF(pyfunc);
    Py_XSETREF(self->pyfunc, pyfunc);
    self->generation = next_generation++;
    self->enabled = 1;
    self->want_hook = frame_hook;
    return 0;
}

static int
CTracer_traverse(CTracer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cache);
    Py_VISIT(self->decide);
    Py_VISIT(self->pyfunc);
    return 0;
}

static int
CTracer_clear(CTracer *self)
{
    self->enabled = 0;
    if (self->hooked) {
        self->hooked = 0;
        hook_release();
    }
    Py_CLEAR(self->cache);
    Py_CLEAR(self->decide);
    Py_CLEAR(self->pyfunc);
    return 0;
}

static void
CTracer_dealloc(CTracer *self)
{
    PyObject_GC_UnTrack(self);
    CTracer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
check_ready(CTracer *self)
{
    if (self->cache == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "CTracer not initialised");
        return -1;
    }
    return 0;
}

static PyObject *
CTracer_install(CTracer *self, PyObject *Py_UNUSED(ignored))
{
    if (check_ready(self) < 0) {
        return NULL;
    }
    if (!self->enabled) {
        PyErr_SetString(PyExc_RuntimeError, "CTracer is disabled");
        return NULL;
    }
    PyEval_SetTrace(ctrace, (PyObject *)self);
    if (PyErr_Occurred()) {     /* an audit hook refused sys.settrace */
        return NULL;
    }
    if (self->want_hook && !self->hooked) {
        self->hooked = hook_acquire();
    }
    Py_RETURN_NONE;
}

static PyObject *
CTracer_disable(CTracer *self, PyObject *Py_UNUSED(ignored))
{
    self->enabled = 0;
    if (self->hooked) {
        self->hooked = 0;
        hook_release();
    }
    Py_RETURN_NONE;
}

static PyObject *
CTracer_stats(CTracer *self, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{sKsKsKsKsisisnsi}", "excluded_calls", self->excluded_calls,
                         "traced_calls", self->traced_calls, "decisions", self->decisions,
                         "untraced_frames", self->untraced_frames,
                         "enabled", self->enabled, "frame_hook", self->hooked,
                         "frame_hook_users", hook_users, "frame_hook_gave_up", hook_dead);
}

/* Called as a Python trace function (threading.settrace in a new thread, or
 * sys.settrace(sys.gettrace())): put the C function in place for this thread, then handle the
 * event as it would have. The result becomes frame.f_trace in CPython's trampoline. */
static PyObject *
CTracer_call(CTracer *self, PyObject *args, PyObject *kwds)
{
    PyFrameObject *frame;
    PyObject *event, *arg;
    static char *kwlist[] = {"frame", "event", "arg", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!UO:CTracer", kwlist,
                                     &PyFrame_Type, &frame, &event, &arg)) {
        return NULL;
    }
    if (check_ready(self) < 0) {
        return NULL;
    }
    if (!self->enabled) {
        PyEval_SetTrace(NULL, NULL);
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyEval_SetTrace(ctrace, (PyObject *)self);
    if (PyErr_Occurred()) {
        return NULL;
    }
    int what = -1;
    for (int i = 0; i < 8; i++) {
        int eq = PyUnicode_Compare(event, whatstrings[i]);
        if (eq == 0) {
            what = i;
            break;
        }
        if (eq == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (what == PyTrace_CALL) {
        Py_INCREF(self);
        int rc = ctrace((PyObject *)self, frame, what, arg == Py_None ? NULL : arg);
        Py_DECREF(self);
        if (rc < 0) {
            return NULL;
        }
    }
    PyObject *f_trace = frame->f_trace;
    return Py_NewRef(f_trace != NULL ? f_trace : Py_None);
}

static PyObject *
CTracer_get_enabled(CTracer *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->enabled);
}

static PyGetSetDef CTracer_getset[] = {
    {"enabled", (getter)CTracer_get_enabled, NULL,
     "True until disable() (read-only).", NULL},
    {NULL, NULL, NULL, NULL, NULL}
};

static PyMethodDef CTracer_methods[] = {
    {"install", (PyCFunction)CTracer_install, METH_NOARGS,
     "install()\n--\n\nMake this tracer the trace function of the calling thread (PyEval_SetTrace),\n"
     "and take the frame hook (once per tracer) unless frame_hook=False or another hook is set."},
    {"disable", (PyCFunction)CTracer_disable, METH_NOARGS,
     "disable()\n--\n\nStop: every thread still running this tracer removes it at its next event;\n"
     "the frame hook is removed when no tracer holds it."},
    {"stats", (PyCFunction)CTracer_stats, METH_NOARGS,
     "stats()\n--\n\nCounters: excluded_calls (call events answered in C), traced_calls, decisions,\n"
     "untraced_frames (excluded frames the hook ran untraced); enabled, frame_hook, frame_hook_users,\n"
     "frame_hook_gave_up (deep recursion: the hook was removed)."},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject CTracer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer._ctrace.CTracer",
    .tp_doc = PyDoc_STR(
        "CTracer(cache, decide, pyfunc, frame_hook=True)\n--\n\n"
        "A C trace function for CPython 3.11: excluded code (cache value None) costs no Python\n"
        "call; included code calls pyfunc(frame, 'call', arg) like sys.settrace's trampoline."),
    .tp_basicsize = sizeof(CTracer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CTracer_init,
    .tp_dealloc = (destructor)CTracer_dealloc,
    .tp_traverse = (traverseproc)CTracer_traverse,
    .tp_clear = (inquiry)CTracer_clear,
    .tp_call = (ternaryfunc)CTracer_call,
    .tp_methods = CTracer_methods,
    .tp_getset = CTracer_getset,
};

static struct PyModuleDef ctrace_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tracer._ctrace",
    .m_doc = "C-level trace function for tracer.NicerTrace on CPython 3.11 (optional).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__ctrace(void)
{
    static const char *names[8] = {"call", "exception", "line", "return",
                                   "c_call", "c_exception", "c_return", "opcode"};
    for (int i = 0; i < 8; i++) {
        if (whatstrings[i] == NULL) {
            whatstrings[i] = PyUnicode_InternFromString(names[i]);
            if (whatstrings[i] == NULL) {
                return NULL;
            }
        }
    }
    if (extra_index < 0) {
        extra_index = _PyEval_RequestCodeExtraIndex(NULL);
        if (extra_index < 0) {
            PyErr_SetString(PyExc_ImportError, "tracer._ctrace: no free code-object extra index");
            return NULL;
        }
    }
    if (PyType_Ready(&CTracer_Type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&ctrace_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "CTracer", (PyObject *)&CTracer_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
