from __future__ import annotations

import numpy as np
import torch
from forethought.predict.proxy import Formulation
from forethought.predict.training import fit_head, validation_loss


def test_head_fit_with_validation_keeps_the_best_epoch_and_learns_the_signal() -> None:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(600, 8)).astype(np.float32)
    targets = torch.as_tensor(4.0 + features[:, 0], dtype=torch.float32)
    torch.manual_seed(0)
    head = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    untrained = validation_loss(head, Formulation.REG_L1, features[500:], targets[500:])
    fit_head(head, Formulation.REG_L1, features[:500], targets[:500], epochs=30, learning_rate=2e-2,
             validation=(features[500:], targets[500:]), patience=5)
    trained = validation_loss(head, Formulation.REG_L1, features[500:], targets[500:])
    assert trained < 0.3 < untrained
    assert not head.training


class TinyBackbone(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.config = type("Config", (), {"hidden_size": 4})()


def test_regression_head_starts_at_the_median_target() -> None:
    from forethought.predict.proxy import ProxyLengthModel

    model = ProxyLengthModel(TinyBackbone(), Formulation.REG_L1, hidden=8)
    model.start_at(torch.tensor([3.0, 5.0, 6.0]))
    assert float(model.head[-1].bias.detach()) == 5.0
    classifier = ProxyLengthModel(TinyBackbone(), Formulation.CLS, hidden=8)
    before = classifier.head[-1].bias.clone()
    classifier.start_at(torch.tensor([0, 4, 4]))
    assert torch.equal(classifier.head[-1].bias, before)
