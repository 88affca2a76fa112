// The grader's observer of GPU work: a CUPTI injection library. The CUDA driver loads it into
// a test process through CUDA_INJECTION64_PATH and calls InitializeInjection at cuInit, before
// any student code has run there. It records every kernel, copy and fill the GPU ran, and every
// kernel launch the host made (with the stream it named), and writes them as JSON lines to the
// pipe whose write end the grader passed in COURSE_OBSERVER_FD. The grader reads them in its own
// process (autograder/observer/records.py); nothing the test process's Python does reaches them.
//
// Lines: {"t":"hello",...} once at start; "kernel", "memcpy", "memset" records as CUPTI delivers
// them; "launch" records from the launch callbacks; "flush" after each course_observer_flush();
// "dropped" where CUPTI lost records; "error" where a CUPTI call failed; "end" at exit.

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <cxxabi.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

namespace {

constexpr int kRecordVersion = 1;
constexpr int kHighFd = 900;  // out of the way of the descriptors the process opens itself
constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kNameLimit = 2048;

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 KernelRecord;
#else
typedef CUpti_ActivityKernel9 KernelRecord;
#endif
typedef CUpti_ActivityMemcpy6 MemcpyRecord;
typedef CUpti_ActivityMemset4 MemsetRecord;

int out_fd = -1;
pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
CUpti_SubscriberHandle subscriber;
thread_local uint32_t runtime_launch = 0;  // the outermost runtime launch this thread is inside, if any

void write_line(const std::string& line) {
  pthread_mutex_lock(&out_lock);
  const char* at = line.data();
  size_t left = line.size();
  while (out_fd >= 0 && left > 0) {
    ssize_t written = write(out_fd, at, left);
    if (written <= 0) {  // the grader stopped reading: nothing more can reach it
      close(out_fd);
      out_fd = -1;
      break;
    }
    at += written;
    left -= static_cast<size_t>(written);
  }
  pthread_mutex_unlock(&out_lock);
}

// A JSON string: bytes past ASCII as \u00XX (a name is bytes, not text), cut at kNameLimit.
std::string quoted(const char* text) {
  std::string out = "\"";
  for (size_t i = 0; text != nullptr && text[i] != '\0' && i < kNameLimit; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c > 0x7e) {
      char escaped[8];
      snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string number(const char* key, unsigned long long value) {
  char field[64];
  snprintf(field, sizeof field, ",\"%s\":%llu", key, value);
  return field;
}

void report_error(const char* what, CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  write_line("{\"t\":\"error\",\"what\":" + quoted(what) + number("code", result) + ",\"text\":" + quoted(text) +
             "}\n");
}

bool check(const char* what, CUptiResult result) {
  if (result != CUPTI_SUCCESS) report_error(what, result);
  return result == CUPTI_SUCCESS;
}

// ---- activity records ----

std::string demangled(const char* name) {
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && plain != nullptr ? quoted(plain) : quoted(name);
  free(plain);
  return out;
}

std::string timed(const char* kind, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                  uint32_t correlation) {
  return std::string("{\"t\":\"") + kind + "\"" + number("start", start) + number("end", end) +
         number("device", device) + number("stream", stream) + number("corr", correlation);
}

void write_record(const CUpti_Activity* record) {
  if (record->kind == CUPTI_ACTIVITY_KIND_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
    auto k = reinterpret_cast<const KernelRecord*>(record);
    char shape[160];
    snprintf(shape, sizeof shape, ",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d]", k->gridX, k->gridY, k->gridZ,
             k->blockX, k->blockY, k->blockZ);
    write_line(timed("kernel", k->start, k->end, k->deviceId, k->streamId, k->correlationId) + shape +
               ",\"name\":" + quoted(k->name) + ",\"demangled\":" + demangled(k->name) + "}\n");
  } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
    auto m = reinterpret_cast<const MemcpyRecord*>(record);
    write_line(timed("memcpy", m->start, m->end, m->deviceId, m->streamId, m->correlationId) +
               number("bytes", m->bytes) + number("copy", m->copyKind) + "}\n");
  } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
    auto m = reinterpret_cast<const MemsetRecord*>(record);
    write_line(timed("memset", m->start, m->end, m->deviceId, m->streamId, m->correlationId) +
               number("bytes", m->bytes) + "}\n");
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) write_record(record);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0)
    write_line(std::string("{\"t\":\"dropped\"") + number("n", dropped) + "}\n");
  free(buffer);
}

// ---- launches, with the stream they name ----

enum StreamKind { kExplicit = 0, kLegacy = 1, kPerThread = 2, kUnknown = 3 };

// NULL is the legacy default stream, or the per-thread one for a _ptsz entry point.
StreamKind stream_kind(const void* stream, bool per_thread_default) {
  uintptr_t handle = reinterpret_cast<uintptr_t>(stream);
  if (handle == 0) return per_thread_default ? kPerThread : kLegacy;
  if (handle == 0x1) return kLegacy;  // CU_STREAM_LEGACY, cudaStreamLegacy
  if (handle == 0x2) return kPerThread;  // CU_STREAM_PER_THREAD, cudaStreamPerThread
  return kExplicit;
}

#if CUPTI_API_VERSION >= 130000
// The entry point nvcc 13's <<<...>>> calls; CUPTI passes its arguments as it does every
// function's, a struct of them in order, for which the toolkit's headers have no name.
struct LaunchKernelV13000Params {
  cudaKernel_t kernel;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};
#endif

StreamKind runtime_stream(CUpti_CallbackId id, const void* params) {
  switch (id) {
#if CUPTI_API_VERSION >= 130000
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
      return stream_kind(static_cast<const LaunchKernelV13000Params*>(params)->stream, false);
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
      return stream_kind(static_cast<const LaunchKernelV13000Params*>(params)->stream, true);
#endif
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      return stream_kind(static_cast<const cudaLaunchKernel_v7000_params*>(params)->stream, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      return stream_kind(static_cast<const cudaLaunchKernel_ptsz_v7000_params*>(params)->stream, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      return stream_kind(static_cast<const cudaLaunchKernelExC_v11060_params*>(params)->config->stream, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      return stream_kind(static_cast<const cudaLaunchKernelExC_ptsz_v11060_params*>(params)->config->stream, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      return stream_kind(static_cast<const cudaLaunchCooperativeKernel_v9000_params*>(params)->stream, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
      return stream_kind(static_cast<const cudaGraphLaunch_v10000_params*>(params)->stream, false);
    default:
      return kUnknown;  // the driver launch it makes names the stream
  }
}

StreamKind driver_stream(CUpti_CallbackId id, const void* params) {
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return stream_kind(static_cast<const cuLaunchKernel_params*>(params)->hStream, false);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return stream_kind(static_cast<const cuLaunchKernel_ptsz_params*>(params)->hStream, true);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return stream_kind(static_cast<const cuLaunchKernelEx_params*>(params)->config->hStream, false);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return stream_kind(static_cast<const cuLaunchKernelEx_ptsz_params*>(params)->config->hStream, true);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      return stream_kind(static_cast<const cuLaunchCooperativeKernel_params*>(params)->hStream, false);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return stream_kind(static_cast<const cuLaunchCooperativeKernel_ptsz_params*>(params)->hStream, true);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
      return stream_kind(static_cast<const cuGraphLaunch_params*>(params)->hStream, false);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      return stream_kind(static_cast<const cuGraphLaunch_ptsz_params*>(params)->hStream, true);
    default:
      return kUnknown;  // cuLaunch, cuLaunchGrid: the legacy stream, or one named elsewhere
  }
}

const CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
#if CUPTI_API_VERSION >= 130000
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
#endif
};

const CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

// A runtime launch calls other launches in turn (a driver launch, another runtime entry point),
// and the kernel's record carries one of their correlation ids: each call inside the outermost
// runtime launch is written with that launch's id as "outer", so the grader counts them as one.
void CUPTIAPI on_launch(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  auto info = static_cast<const CUpti_CallbackData*>(data);
  bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (info->callbackSite == CUPTI_API_EXIT) {
    if (runtime && runtime_launch == info->correlationId) runtime_launch = 0;
    return;
  }
  StreamKind stream = runtime ? runtime_stream(id, info->functionParams) : driver_stream(id, info->functionParams);
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  write_line(std::string("{\"t\":\"launch\",\"api\":\"") + (runtime ? "runtime" : "driver") + "\"" +
             number("corr", info->correlationId) + number("outer", runtime_launch) +
             number("stream_kind", stream) + number("ts", now) + number("cbid", id) + "}\n");
  if (runtime && runtime_launch == 0) runtime_launch = info->correlationId;
}

// ---- start and end ----

void at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  write_line("{\"t\":\"end\"}\n");
}

// The write end of the grader's pipe, moved out of the way of the process's own descriptors
// and closed where it was: its number in the environment then names nothing.
bool take_pipe() {
  const char* named = getenv("COURSE_OBSERVER_FD");
  if (named == nullptr) return false;
  char* rest = nullptr;
  long fd = strtol(named, &rest, 10);
  if (rest == named || *rest != '\0' || fd < 0 || fd > 65535) return false;
  int high = fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, kHighFd);
  if (high < 0) return false;
  close(static_cast<int>(fd));
  out_fd = high;
  return true;
}

bool enable_activities() {
  return check("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) &&
         check("enable kernels", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) &&
         check("enable memcpy", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY)) &&
         check("enable memset", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
}

bool enable_launch_callbacks() {
  if (!check("cuptiSubscribe", cuptiSubscribe(&subscriber, on_launch, nullptr))) return false;
  bool ok = true;
  for (CUpti_CallbackId id : kRuntimeLaunches)
    ok = check("enable a runtime launch callback", cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id)) && ok;
  for (CUpti_CallbackId id : kDriverLaunches)
    ok = check("enable a driver launch callback", cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id)) && ok;
  return ok;
}

}  // namespace

// The grader's harness calls this after each observed case: every record up to now reaches the
// pipe, then a "flush" line that says so.
extern "C" __attribute__((visibility("default"))) void course_observer_flush(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  write_line(std::string("{\"t\":\"flush\"") + number("ts", now) + "}\n");
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static bool done = false;
  if (done) return 1;
  done = true;
  if (!take_pipe()) return 0;  // no grader to tell: the process runs unobserved, and the grader sees no hello
  uint32_t api = 0;
  cuptiGetVersion(&api);
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  bool ok = enable_activities() && enable_launch_callbacks();
  write_line(std::string("{\"t\":\"hello\"") + number("version", kRecordVersion) + number("cupti", api) +
             number("pid", static_cast<unsigned long long>(getpid())) + number("ts", now) +
             number("ok", ok ? 1 : 0) + "}\n");
  atexit(at_exit);
  return 1;
}
