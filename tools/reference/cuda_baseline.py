"""Same-machine baseline for tests/cuda/bench_cuda_ops: PyTorch's BF16 GEMM (cuBLAS) and SDPA
(flash / cuDNN backends) at the DiT shapes, timed with CUDA events (median). Run on the GPU machine
by tests/cuda/run_device.sh when torch with CUDA is importable; never needed by the engine."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def main():
    torch.manual_seed(0)
    dev = "cuda"
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for M in (2122, 37966):
        for name, N, K in (("qkv", 21504, 5376), ("ffn up", 28672, 5376), ("ffn down", 5376, 14336)):
            x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02
            ms = median_ms(lambda: x @ w.t(), 7)
            print(f"torch gemm {name:9s} M={M:6d} N={N:6d} K={K:6d} {ms:9.3f} ms {2*M*N*K/ms/1e9:7.1f} TFLOP/s")
            del x, w
    H, D = 56, 128
    for S in (2122, 19400, 37966):
        q, k, v = (torch.randn(1, H, S, D, device=dev, dtype=torch.bfloat16) * 2 for _ in range(3))
        for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v), 3 if S > 10000 else 11)
                print(f"torch sdpa {label:5s} S={S:6d} {ms:9.3f} ms {4*S*S*H*D/ms/1e9:7.1f} TFLOP/s")
            except RuntimeError as err:
                print(f"torch sdpa {label:5s} S={S:6d} unavailable: {str(err).splitlines()[0]}")
        del q, k, v


if __name__ == "__main__":
    main()
