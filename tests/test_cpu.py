"""glimpse.cpu: the process settings every command and training run share."""
import pytest
import torch

from glimpse.cpu import configure_cpu, flushes_denormals


def test_configure_cpu_sets_the_threads_and_flushes_denormals():
    threads = torch.get_num_threads()
    try:
        assert not flushes_denormals()  # torch's default: 1e-40 is kept
        took = configure_cpu(2)  # not the suite's 1 (conftest), so that the call is what sets it
        assert torch.get_num_threads() == 2
        if not took:
            pytest.skip("this CPU cannot flush denormals (torch.set_flush_denormal: x86 with SSE3 only)")
        assert flushes_denormals()
        configure_cpu(None)  # no thread count: threads left as they are
        assert torch.get_num_threads() == 2 and flushes_denormals()
    finally:
        torch.set_num_threads(threads)


def test_a_draw_filter_far_from_its_centre_is_zero_not_denormal():
    """What the flush is for: a narrow DRAW filter's tail underflows through the denormal range."""
    from glimpse.models.filterbank import filter_axis

    def tail():
        filters = filter_axis(torch.tensor([30.0]), torch.tensor([1.0]), torch.tensor([2.0]), 60, 12)
        return filters[(filters > 0) & (filters < torch.finfo(torch.float32).tiny)]

    assert tail().numel() > 0  # denormals, by torch's default
    if configure_cpu():
        assert tail().numel() == 0

