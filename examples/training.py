"""Generated kernels that train: RMSNorm and a matmul compiled with their backward
(`compile(func, wrt=...)`, tir_passes.differentiate), registered as ops whose autograd formula is the
backward kernels, in a model trained under torch.compile(fullgraph=True). docs/autodiff.md explains it.

    python examples/training.py        # CPU: Triton's interpreter; a GPU: the compiled kernels
"""

import torch
from torch import nn

from matmul import make_matmul
from rmsnorm import make_rmsnorm
from triton_codegen import compile

M, N, K = 16, 24, 32   # rows, features out, features in

rmsnorm = compile(make_rmsnorm(K), wrt=["X", "weight"]).as_torch_op("examples::rmsnorm_trains")
matmul = compile(make_matmul(M, N, K, "float32", "float32"), wrt=["A", "B"]).as_torch_op("examples::matmul_trains")


class Layer(nn.Module):
    def __init__(self, ops: bool):
        super().__init__()
        self.ops = ops
        generator = torch.Generator().manual_seed(0)
        self.norm = nn.Parameter(torch.ones(K))
        self.weight = nn.Parameter(torch.randn(K, N, generator=generator) / K**0.5)

    def forward(self, x):
        if self.ops:
            return matmul(rmsnorm(x, self.norm), self.weight)
        h = x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * self.norm
        return h @ self.weight


def train(model, steps: int, data, target):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(lambda: ((model(data) - target) ** 2).mean(), fullgraph=True, backend="aot_eager")
    for _ in range(steps):
        optimizer.zero_grad()
        loss = step()
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    generator = torch.Generator().manual_seed(1)
    data, target = torch.randn(M, K, generator=generator), torch.randn(M, N, generator=generator)
    ours, reference = Layer(ops=True), Layer(ops=False)
    loss, expected = train(ours, 3, data, target), train(reference, 3, data, target)
    torch.testing.assert_close(ours.weight, reference.weight, rtol=1e-4, atol=1e-5)
    print(f"3 SGD steps through the generated forward and backward kernels: loss {loss:.5f} "
          f"(torch: {expected:.5f}); the parameters match torch's")


if __name__ == "__main__":
    main()
