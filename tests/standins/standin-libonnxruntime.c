/* STAND-IN for ONNX Runtime's C API library (libonnxruntime.so), for tests only: ORT cannot be
 * built here. It exports what `workbench smoke` asks a built library for and nothing else:
 * OrtGetApiBase(), whose GetVersionString() returns STANDIN_VERSION (given when compiled:
 * cc -shared -fPIC -DSTANDIN_VERSION='"1.24.2"'), and whose GetApi() returns NULL (as the real
 * one does for an API version it does not support).
 *
 * Modelled on include/onnxruntime/core/session/onnxruntime_c_api.h of microsoft/onnxruntime,
 * read at 0017800f6539412b364502d8b59c11463a6411e6 (the copy the reference store holds; the
 * v1.24.2 tag's, the release of configs/releases.toml this is mostly built as, could not be read
 * here): `struct OrtApiBase { const OrtApi* (*GetApi)(uint32_t version);
 * const char* (*GetVersionString)(void); };` and `const OrtApiBase* OrtGetApiBase(void)`.
 * OrtApiBase is unversioned: onnxruntime_c_api.cc static_asserts its size (two pointers) and
 * its order ("OrtApiBase can never change"), so it is the same at every release.
 */
#include <stddef.h>
#include <stdint.h>

#ifndef STANDIN_VERSION
#error "compile with -DSTANDIN_VERSION='\"X.Y.Z\"'"
#endif

struct OrtApi;

struct OrtApiBase {
  const struct OrtApi* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)(void);
};

static const struct OrtApi* standin_get_api(uint32_t version) {
  (void)version;
  return NULL;
}

static const char* standin_version_string(void) { return STANDIN_VERSION; }

static const struct OrtApiBase standin_api_base = {standin_get_api, standin_version_string};

__attribute__((visibility("default"))) const struct OrtApiBase* OrtGetApiBase(void) {
  return &standin_api_base;
}
