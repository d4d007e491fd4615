"""The fixture of the adversarial tests: a real extension module (`builders.build_module`)."""

from __future__ import annotations

import pytest
from builders import Built, build_module


@pytest.fixture(scope="session")
def module(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_module(tmp_path_factory.mktemp("abi3"))
