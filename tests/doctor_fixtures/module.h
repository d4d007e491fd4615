/* The module init every fixture extension shares: build with -DMODULE=<name>.
   Each source defines fixture_touch(), which refers to the symbols under test. */
#include <Python.h>

#define FIXTURE_CAT_(a, b) a##b
#define FIXTURE_CAT(a, b) FIXTURE_CAT_(a, b)
#define FIXTURE_STR_(x) #x
#define FIXTURE_STR(x) FIXTURE_STR_(x)

#ifdef __cplusplus
extern "C" {
#endif

static void fixture_touch(void);

static struct PyModuleDef fixture_module = {
    PyModuleDef_HEAD_INIT, FIXTURE_STR(MODULE), NULL, -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC FIXTURE_CAT(PyInit_, MODULE)(void) {
    fixture_touch();
    return PyModule_Create(&fixture_module);
}

#ifdef __cplusplus
}
#endif
