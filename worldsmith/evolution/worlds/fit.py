"""Small numpy estimators the auditor uses to re-estimate edge magnitudes, with standard errors.

- OLS for numeric/count targets with additive mechanisms;
- logistic regression (IRLS) for binary targets (every mechanism acts on the logit);
- Gauss-Newton for numeric/count targets with multiplicative mechanisms:
  mean = (b0 + Xa @ beta) * exp(Xm @ gamma).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class FitResult:
    coef: np.ndarray  # without the intercept, in the order of the design columns
    se: np.ndarray
    intercept: float
    n: int
    method: str


def _cov(jtj: np.ndarray, sigma2: float) -> np.ndarray:
    return np.linalg.pinv(jtj) * sigma2


def ols(X: np.ndarray, y: np.ndarray) -> FitResult:
    A = np.column_stack([np.ones(len(y)), X])
    beta, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ beta
    dof = max(len(y) - A.shape[1], 1)
    cov = _cov(A.T @ A, float(resid @ resid) / dof)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    return FitResult(beta[1:], se[1:], float(beta[0]), len(y), "ols")


def _loglik(A: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    eta = A @ beta
    return float(np.sum(y * eta - np.logaddexp(0.0, eta)))


def logistic(X: np.ndarray, y: np.ndarray, iters: int = 50) -> FitResult:
    """Newton-Raphson with step halving, so (quasi-)separated data cannot send estimates to infinity."""
    A = np.column_stack([np.ones(len(y)), X])
    p0 = np.clip(y.mean(), 1e-6, 1 - 1e-6)
    beta = np.zeros(A.shape[1])
    beta[0] = np.log(p0 / (1 - p0))
    cur = _loglik(A, y, beta)
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(A @ beta, -30, 30)))
        w = np.clip(p * (1 - p), 1e-9, None)
        step = np.linalg.lstsq(A.T @ (A * w[:, None]), A.T @ (y - p), rcond=None)[0]
        lam = 1.0
        while lam > 1e-4 and _loglik(A, y, beta + lam * step) < cur - 1e-12:
            lam /= 2
        if lam <= 1e-4:
            break
        beta = beta + lam * step
        new = _loglik(A, y, beta)
        if abs(new - cur) < 1e-10 * max(1.0, abs(cur)) or np.max(np.abs(lam * step)) < 1e-8:
            cur = new
            break
        cur = new
    eta = np.clip(A @ beta, -30, 30)
    p = 1 / (1 + np.exp(-eta))
    cov = _cov(A.T @ (A * (p * (1 - p))[:, None]), 1.0)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    return FitResult(beta[1:], se[1:], float(beta[0]), len(y), "logistic")


def gauss_newton(Xa: np.ndarray, Xm: np.ndarray, y: np.ndarray, iters: int = 100) -> FitResult:
    """Least squares for mean = (b0 + Xa beta) * exp(Xm gamma); coef = [beta..., gamma...]."""
    ka, km = Xa.shape[1], Xm.shape[1]
    A = np.column_stack([np.ones(len(y)), Xa])
    theta = np.concatenate([ols(Xa, y).coef if ka else np.zeros(0), np.zeros(km)])
    theta = np.concatenate([[y.mean()], theta]) if ka == 0 else np.concatenate([[ols(Xa, y).intercept], theta])

    def parts(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        add = A @ t[: ka + 1]
        fac = np.exp(np.clip(Xm @ t[ka + 1:], -30, 30))
        return add, fac, add * fac

    def sse(t: np.ndarray) -> float:
        r = y - parts(t)[2]
        return float(r @ r)

    cur = sse(theta)
    for _ in range(iters):
        add, fac, mu = parts(theta)
        J = np.column_stack([A * fac[:, None], Xm * mu[:, None]])
        step = np.linalg.lstsq(J, y - mu, rcond=None)[0]
        lam = 1.0
        while lam > 1e-4:
            cand = theta + lam * step
            val = sse(cand)
            if val <= cur:
                break
            lam /= 2
        else:
            break
        done = abs(cur - val) <= 1e-12 * max(cur, 1.0)
        theta, cur = cand, val
        if done:
            break
    add, fac, mu = parts(theta)
    J = np.column_stack([A * fac[:, None], Xm * mu[:, None]])
    dof = max(len(y) - len(theta), 1)
    cov = _cov(J.T @ J, cur / dof)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    return FitResult(theta[1:], se[1:], float(theta[0]), len(y), "gauss_newton")


def fit_target(kind: str, X: np.ndarray, multiplicative: np.ndarray, y: np.ndarray) -> FitResult:
    """Estimate all magnitudes of a target's edges; `multiplicative` flags columns in the log-factor."""
    if kind == "binary":
        return logistic(X, y)
    if not multiplicative.any():
        return ols(X, y)
    order = np.concatenate([np.flatnonzero(~multiplicative), np.flatnonzero(multiplicative)])
    res = gauss_newton(X[:, ~multiplicative], X[:, multiplicative], y)
    coef, se = np.empty_like(res.coef), np.empty_like(res.se)
    coef[order], se[order] = res.coef, res.se
    return FitResult(coef, se, res.intercept, res.n, res.method)
