from __future__ import annotations

import numpy as np
import torch
from forethought.predict.fitting import fit_head, validation_loss
from forethought.predict.proxy import Formulation


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


def test_history_features_describe_the_earlier_answers() -> None:
    from forethought.predict.history import (
        HISTORY_FEATURES,
        NO_HISTORY,
        ConversationHistory,
        head_inputs,
        history_features,
    )

    rows = history_features([NO_HISTORY, ConversationHistory((100,)), ConversationHistory((100, 3000))])
    assert rows.shape == (3, HISTORY_FEATURES)
    assert not rows[0].any()
    assert rows[1][0] == rows[2][0] > 0
    assert rows[2][1] > rows[1][1]  # the last answer is longer
    assert rows[2][2] == rows[1][1]  # the second-last answer of the longer chat is the first chat's last
    assert rows[2][6] > rows[1][6]  # more earlier rounds
    inputs = head_inputs(np.ones((3, 4), np.float32), [NO_HISTORY] * 3)
    assert inputs.shape == (3, 4 + HISTORY_FEATURES) and inputs[:, :4].all()


def test_the_model_head_reads_the_cls_state_and_the_history_features() -> None:
    from forethought.predict.history import HISTORY_FEATURES
    from forethought.predict.proxy import ProxyLengthModel

    model = ProxyLengthModel(TinyBackbone(), Formulation.REG_L1, hidden=8)
    assert model.head[0].in_features == 4 + HISTORY_FEATURES
