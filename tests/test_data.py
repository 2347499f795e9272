import numpy as np
import pytest

import envs.data as data
from envs.data import BUNDLED_SUBSET, DataError, load_bundled_subset, load_mnist


def test_bundled_subset_is_small_real_mnist_with_all_classes():
    assert BUNDLED_SUBSET.stat().st_size <= 3_000_000
    splits = load_bundled_subset()
    assert splits.is_subset
    for name in ("train", "val", "test"):
        digits = splits.split(name)
        assert digits.images.dtype == np.uint8 and digits.images.shape[1:] == (28, 28)
        assert set(np.unique(digits.labels)) == set(range(10))
    assert len(splits.train) + len(splits.val) == 10_000 and len(splits.test) == 2000


def test_splits_are_disjoint_and_fixed():
    a, b = load_bundled_subset(), data._split(*data.read_bundled_subset(), source="x", is_subset=True)
    np.testing.assert_array_equal(a.val.images, b.val.images)
    train_rows = {x.tobytes() for x in a.train.images}
    assert not any(x.tobytes() in train_rows for x in a.val.images[:200])


def test_arrays_are_read_only():
    with pytest.raises(ValueError):
        load_bundled_subset().train.images[0, 0, 0] = 1


def _clear():
    data._load_cached.cache_clear()


def test_explicit_dir_without_mnist_is_an_error_not_a_fallback(tmp_path, monkeypatch):
    _clear()
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    with pytest.raises(DataError, match="no MNIST in"):
        load_mnist(tmp_path)
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path))
    with pytest.raises(DataError, match="GLIMPSE_DATA"):
        load_mnist()


def test_an_empty_data_dir_is_an_error_but_an_empty_env_var_is_unset(tmp_path, monkeypatch):
    _clear()
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path))  # would be a different error if "" fell through to it
    with pytest.raises(DataError, match="--data-dir is empty"):
        load_mnist("")
    monkeypatch.setenv(data.DATA_ENV_VAR, "")
    monkeypatch.chdir(tmp_path)
    assert data.explicit_data_dir(None) is None


def test_corrupt_files_are_reported(tmp_path):
    _clear()
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in data.RAW_FILES:
        (raw / name).write_bytes(b"not an idx file")
    with pytest.raises(DataError, match="corrupt or unreadable"):
        load_mnist(tmp_path)


def test_fallback_order_local_then_cache_download_then_subset(tmp_path, monkeypatch):
    _clear()
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    calls = []

    def no_network(root):
        calls.append(root)
        return "URLError: no route to host"

    monkeypatch.setattr(data, "_download", no_network)
    with pytest.warns(data.BundledSubsetWarning, match="bundled subset") as caught:
        splits = load_mnist()
    assert len(caught) == 1 and "no route to host" in str(caught[0].message)  # one message, with the reason
    assert splits.is_subset and "bundled" in splits.source
    assert calls == [tmp_path / "cache" / "glimpse"], "the download goes to the user cache"
    assert not (tmp_path / "data").exists(), "nothing is created in the working directory"

    # ./data wins over the cache and a download once it holds MNIST: fake it with the subset's arrays
    _clear()
    monkeypatch.setattr(data, "_has_raw_files", lambda root: root == tmp_path / "data")
    monkeypatch.setattr(data, "_read_torchvision", lambda root: data.read_bundled_subset())
    splits = load_mnist()
    assert not splits.is_subset and str(tmp_path / "data") in splits.source
    assert len(calls) == 1, "no download when ./data has MNIST"

    # a cache that holds MNIST is used without a download
    _clear()
    monkeypatch.setattr(data, "_has_raw_files", lambda root: root == tmp_path / "cache" / "glimpse")
    assert str(tmp_path / "cache" / "glimpse") in load_mnist().source and len(calls) == 1

    # an explicit directory wins over ./data
    _clear()
    other = tmp_path / "elsewhere"
    monkeypatch.setattr(data, "_has_raw_files", lambda root: True)
    assert str(other) in load_mnist(other).source
    _clear()


def test_bundled_keyword(monkeypatch):
    monkeypatch.setenv(data.DATA_ENV_VAR, "bundled")
    assert load_mnist().is_subset


def test_the_bundled_subset_warning_is_one_line_for_the_user():
    import warnings

    from envs.data import BundledSubsetWarning

    assert warnings.formatwarning("no full MNIST", BundledSubsetWarning, "envs/data.py", 212) == \
        "warning: no full MNIST\n"
    assert "UserWarning" in warnings.formatwarning("other", UserWarning, "x.py", 1)  # others as Python shows them
