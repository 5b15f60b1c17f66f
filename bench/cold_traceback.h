/* Forced into each compiled module by causes_build.py's "cold-traceback" build: Cython's
   traceback function declared cold, so that GCC treats every path that calls it (the
   error paths) as unlikely and may move them out of the hot functions. */
static void __Pyx_AddTraceback(const char *funcname, int c_line, int py_line,
                               const char *filename) __attribute__((cold));
