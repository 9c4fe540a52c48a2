/*
 * Preloaded into the test programs that run under oclgrind (tests/oclgrind-check.sh), never
 * linked into anything else.
 *
 * oclgrind 21.10's --uninitialized plugin keeps the shadow state of a released buffer and reuses
 * it for the next buffer that gets the same buffer id, sized for the old one: kernel writes past
 * the old size are not recorded, and a later kernel reading them is reported as reading
 * uninitialised memory (reproducer: write a 4-float buffer with a kernel, release it, create a
 * 16-float buffer, write all 16 with a kernel, read them with another kernel: 12 false reports).
 * Making clReleaseMemObject a no-op keeps every buffer alive, so ids are never reused. The test
 * processes are short and their buffers small; the PoCL and sanitizer runs still release
 * everything and check for leaks.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

CL_API_ENTRY cl_int CL_API_CALL clReleaseMemObject(cl_mem memobj)
{
    return memobj ? CL_SUCCESS : CL_INVALID_MEM_OBJECT;
}
