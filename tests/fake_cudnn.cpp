// A stand-in for libcudnn.so.9, loaded by the cuDNN loader's tests through FAPROBE_CUDNN_LIBRARY
// (tests/test_cudnn.cpp) on any machine: the entry points the loader requires (cuda/runtime/cudnn_library.cpp),
// none of which does anything but cudnnGetVersion, which answers FAKE_CUDNN_VERSION. Built twice: as cuDNN
// 9.19.0 (91900, which the loader takes) and as cuDNN 8.9.6 (8906: the planted wrong library, which it must
// refuse). Nothing here is ever called as cuDNN: the tests only load it.
#include <cstddef>

#ifndef FAKE_CUDNN_VERSION
#error "FAKE_CUDNN_VERSION: the number cudnnGetVersion answers"
#endif

namespace {
constexpr int kNotSupported = 3000;  // CUDNN_STATUS_NOT_SUPPORTED (cuDNN 9): what every other entry point answers
}

extern "C" {

__attribute__((visibility("default"))) std::size_t cudnnGetVersion() { return FAKE_CUDNN_VERSION; }
__attribute__((visibility("default"))) const char* cudnnGetErrorString(int) { return "fake cuDNN"; }
__attribute__((visibility("default"))) int cudnnCreate(void**) { return kNotSupported; }
__attribute__((visibility("default"))) int cudnnDestroy(void*) { return kNotSupported; }
__attribute__((visibility("default"))) int cudnnSetStream(void*, void*) { return kNotSupported; }
__attribute__((visibility("default"))) int cudnnBackendCreateDescriptor(int, void**) { return kNotSupported; }
__attribute__((visibility("default"))) int cudnnBackendExecute(void*, void*, void*) { return kNotSupported; }

}  // extern "C"
