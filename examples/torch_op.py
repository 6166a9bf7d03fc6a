"""Generated kernels inside a PyTorch model: register each as an op, call the ops from an
nn.Module, compile the model with torch.compile(fullgraph=True). docs/pytorch.md explains it.

    python examples/torch_op.py        # CPU: Triton's interpreter; a GPU: inductor traces into the kernels
"""

import torch
import torch.nn.functional as F
from torch import nn

from matmul_bias_gelu import make_matmul_bias_gelu
from softmax import make_softmax
from triton_codegen import compile

M, N, K = 37, 48, 32   # rows, features, input features

# op(A, B, bias) -> D = gelu(A @ B + bias), and op(A) -> Out = softmax(A) along rows
feed_forward = compile(make_matmul_bias_gelu(M, N, K)).as_torch_op("examples::feed_forward")
softmax = compile(make_softmax(M, N, "float16")).as_torch_op("examples::softmax")


class Block(nn.Module):
    """softmax(gelu(x @ W + b)): two generated kernels with torch around them."""

    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.randn(K, N, dtype=torch.float16) / K**0.5)
        self.register_buffer("bias", torch.randn(N) * 0.1)

    def forward(self, x):
        return softmax(feed_forward(x * 2.0, self.weight, self.bias))

    def reference(self, x):
        hidden = F.gelu((x * 2.0).float() @ self.weight.float() + self.bias).half()
        return torch.softmax(hidden.float(), dim=1).half()


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Block().to(device)
    x = torch.randn(M, K, dtype=torch.float16, device=device)
    eager = model(x)
    torch.testing.assert_close(eager, model.reference(x), atol=2e-3, rtol=2e-3)
    explained = torch._dynamo.explain(model)(x)
    compiled = torch.compile(model, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")
    torch.testing.assert_close(compiled(x), eager)
    print(f"{device}: {explained.graph_count} graph, {explained.graph_break_count} graph breaks; "
          f"compiled matches eager, eager matches torch (output {tuple(eager.shape)}, {eager.dtype})")
    print(torch.ops.examples.feed_forward.default._schema)
    print(torch.ops.examples.softmax.default._schema)


if __name__ == "__main__":
    main()
