"""Settings from the environment, and the configuration document's table of them kept complete."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.infra.settings import SETTINGS, Settings

CONFIGURATION = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_environment_and_overrides() -> None:
    env = {
        "CHATTTS_PORT": "9001",
        "CHATTTS_COMPILE": "yes",
        "REDIS_URL": "redis://x:1/0",
        "CHATTTS_HEARTBEAT_S": "0.5",
        "CHATTTS_MODEL_DIR": "",
    }
    settings = Settings.from_env(env, port=9002)
    assert settings.web.port == 9002 and settings.chattts.compile is True
    assert settings.redis.redis_url == "redis://x:1/0" and settings.worker.heartbeat_s == 0.5
    assert settings.engine.model_dir is None
    assert Settings.from_env(settings.to_env()) == settings


def test_bad_value_names_the_variable() -> None:
    with pytest.raises(ValueError, match="CHATTTS_LEASE_MS='soon' is not a valid int"):
        Settings.from_env({"CHATTTS_LEASE_MS": "soon"})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CHATTTS_RUNTIME", "fast"),
        ("CHATTTS_DTYPE", "float8"),
        ("CHATTTS_LOG_FORMAT", "xml"),
        ("CHATTTS_CACHE_SCOPE", "everyone"),
        ("CHATTTS_SCHEDULER", "lifo"),
        ("CHATTTS_STREAM_ADMISSION", "maybe"),
    ],
)
def test_a_choice_outside_its_values_is_refused_at_start(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{variable}='{value}' is not a valid"):
        Settings.from_env({variable: value})


def test_configuration_documents_every_setting() -> None:
    text = CONFIGURATION.read_text()
    missing = [name for name in SETTINGS if f"`CHATTTS_{name.upper()}`" not in text]
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_key_weights_and_the_scheduler() -> None:
    settings = Settings.from_env(
        {"CHATTTS_KEY_WEIGHTS": "alpha=4, beta=0.5:bulk,gamma=2:interactive"}
    )
    assert settings.scheduling.key_weight_map == {
        "alpha": (4.0, False),
        "beta": (0.5, True),
        "gamma": (2.0, False),
    }
    for bad in ("alpha", "alpha=0", "alpha=-1", "alpha=x", "=2", "alpha=2:urgent", "a=nan"):
        with pytest.raises(ValueError, match="CHATTTS_KEY_WEIGHTS"):
            Settings.of(key_weights=bad)  # refused as the settings are made
    for bad in ("a=inf", "a=-inf", "a=NaN:bulk"):  # refused as the settings are read
        with pytest.raises(ValueError, match="CHATTTS_KEY_WEIGHTS"):
            Settings.from_env({"CHATTTS_KEY_WEIGHTS": bad})
    with pytest.raises(ValueError, match="CHATTTS_SCHEDULER='lottery'"):
        Settings.from_env({"CHATTTS_SCHEDULER": "lottery"})


def test_no_number_setting_takes_nan_or_infinity() -> None:
    """pydantic reads "nan" and "inf" as floats; a rate, share or time of either would wedge
    whatever divides by it, so each is refused with its variable named."""
    floats = [name for name, setting in SETTINGS.items() if setting.hint is float]
    assert "submit_rate_per_client" in floats and "stream_headroom" in floats
    for name in floats:
        variable = f"CHATTTS_{name.upper()}"
        for bad in ("nan", "inf", "-inf"):
            with pytest.raises(ValueError, match=f"{variable}='{bad}' is not a finite number"):
                Settings.from_env({variable: bad})
