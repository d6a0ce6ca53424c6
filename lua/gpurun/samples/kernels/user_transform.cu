// The "plug-in" half of apply_transform.cu: max(x^2 + 3x - 1, 0), enough
// arithmetic that inlining it across the module boundary (LTO) shows.
extern "C" __device__ float user_transform(float x)
{
    const float y = x * x + 3.0f * x - 1.0f;
    return y > 0.0f ? y : 0.0f;
}
