"""The adaptation heads' losses in PyTorch, as dafuse's head/*.hpp define them: one copy for the
scripts that need them (tools/make_head_vectors.py writes the tests' two-step vectors from
them; tools/reference_mnist_usps.py trains with them for docs/heads.md's PyTorch column).

Rows are source first: h [2B, F] holds the B source rows then the B target rows; B is
h.shape[0] // 2. Each function returns the head's loss L_h (the step adds lambda * L_h to the
label loss); what dafuse holds constant for the gradient is detached here too.

Import after torch's set-up (threads, BLAS re-execution): this module imports torch.
"""

import torch
import torch.nn.functional as F

KERNEL_MULTIPLIERS = (0.125, 0.25, 0.5, 1.0, 2.0)  # DAN's bandwidths, times the mean distance
MCC_TEMPERATURE = 2.5  # head::mcc's default std::ratio<5, 2>


class GradReverse(torch.autograd.Function):
    """Gradient reversal (Ganin & Lempitsky 2015): identity forward, -lambda * grad backward.
    lambda is a 0-dim tensor (a compiled step then never recompiles when it changes) or a
    Python number (the vector scripts' fixed lambda)."""

    @staticmethod
    def forward(ctx, x, lam):
        if torch.is_tensor(lam):
            ctx.save_for_backward(lam)
            ctx.number = None
        else:
            ctx.number = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_out):
        lam = ctx.number if ctx.number is not None else ctx.saved_tensors[0]
        return -lam * grad_out, None


def coral(h):
    """Deep CORAL (Sun & Saenko 2016): ||C_s - C_t||_F^2 / (4 F^2), C the unbiased (1/(B-1))
    covariance of each domain's rows of h."""
    b, features = h.shape[0] // 2, h.shape[1]

    def covariance(x):
        centred = x - x.mean(dim=0, keepdim=True)
        return centred.t() @ centred / (x.shape[0] - 1)
    d = covariance(h[:b]) - covariance(h[b:])
    return (d * d).sum() / (4 * features * features)


def kernel(d, mean):
    """DAN's kernel of squared distances d: the mean of exp(-d / (2 a m)) over the multipliers
    a, m the (detached) mean squared distance."""
    return torch.stack([torch.exp(-d / (2 * a * mean)) for a in KERNEL_MULTIPLIERS]).mean(dim=0)


def mmd(h):
    """DAN's multi-kernel MMD^2 (Long et al. 2015), the unbiased quadratic estimator over all
    pairs, m the mean squared distance over the pairs i != j of the 2B rows (detached)."""
    b, n = h.shape[0] // 2, h.shape[0]
    d = ((h.unsqueeze(1) - h.unsqueeze(0)) ** 2).sum(dim=2)
    off = ~torch.eye(n, dtype=torch.bool)
    mean = d[off].mean().detach()
    if float(mean) == 0.0:  # every row the same: the loss is 0 and so is its gradient
        return (h * 0).sum()
    k = kernel(d, mean)
    same = 1.0 / (b * (b - 1))
    s_s = k[:b, :b][off[:b, :b]].sum() * same
    t_t = k[b:, b:][off[:b, :b]].sum() * same
    s_t = k[:b, b:].sum() * 2.0 / (b * b)
    return s_s + t_t - s_t


def mmd_linear(h):
    """The linear-time estimator over the quad-tuples (s_2i, s_2i+1, t_2i, t_2i+1), i < B/2:
    (2/B) sum_i [k(s_2i, s_2i+1) + k(t_2i, t_2i+1) - k(s_2i, t_2i+1) - k(s_2i+1, t_2i)], m the
    mean squared distance over those 2B pairs (detached)."""
    b = h.shape[0] // 2
    s, t = h[:b], h[b:]
    pairs = []  # (a, b, coefficient)
    for i in range(b // 2):
        pairs += [(s[2 * i], s[2 * i + 1], 1.0), (t[2 * i], t[2 * i + 1], 1.0),
                  (s[2 * i], t[2 * i + 1], -1.0), (s[2 * i + 1], t[2 * i], -1.0)]
    d = torch.stack([((x - y) ** 2).sum() for x, y, _ in pairs])
    mean = d.mean().detach()
    c = torch.tensor([c for _, _, c in pairs], dtype=h.dtype)
    return (c * kernel(d, mean)).sum() * 2.0 / b


def mcc(z_target, temperature=MCC_TEMPERATURE):
    """Minimum Class Confusion (Jin et al. 2020) on the target rows' logits [B, C]:
    Y = softmax(z / T); w_i = 1 + exp(-H(Y_i)) normalised to sum to B, detached;
    C = Y^T diag(w) Y with each column divided by its sum; L = sum_{j != j'} C_jj' / C."""
    b, classes = z_target.shape
    y = F.softmax(z_target / temperature, dim=1)
    entropy = -(y * torch.log(y)).sum(dim=1).detach()
    w = 1.0 + torch.exp(-entropy)
    w = (b * w / w.sum()).unsqueeze(1)
    c = (y * w).t() @ y
    c = c / c.sum(dim=1)
    return (c.sum() - torch.trace(c)) / classes


def entropy_minimisation(z_target):
    """Entropy minimisation (Grandvalet & Bengio 2004) on the target rows' logits [B, C]: the
    mean over the rows of H(softmax(z_i)) = -sum_c p_ic log p_ic (log_softmax: exact)."""
    log_p = F.log_softmax(z_target, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1).mean()


def multilinear_map(z, h):
    """CDAN's map (Long et al. 2018) T = g (x) h, g = softmax(z) detached, T[c*F + j] = g_c h_j:
    [rows, C*F]."""
    g = F.softmax(z, dim=1).detach()
    return torch.bmm(g.unsqueeze(2), h.unsqueeze(1)).view(h.shape[0], -1)


def entropy_weights(z):
    """CDAN+E's row weights: w_i = 1 + exp(-H(softmax(z_i))), H = logsumexp(z) - sum_c g_c z_c
    (exact), normalised to sum to the row count; detached."""
    z = z.detach()
    g = F.softmax(z, dim=1)
    entropy = torch.logsumexp(z, dim=1) - (g * z).sum(dim=1)
    w = 1.0 + torch.exp(-entropy)
    return (w / w.sum() * z.shape[0]).view(-1, 1)
