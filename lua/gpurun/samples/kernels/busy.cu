// Keeps the GPU busy for about `cycles` clock cycles of one SM, so that what
// is launched behind it only queues: the host's cost of a launch can then be
// timed on its own (bench/compare.lua's CPU-per-launch rows).
extern "C" __global__ void busy(long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
