"""Whose memory filled the GPU, from the numbers of PyTorch's out-of-memory message (hangdbg.text.cuda_oom)."""

from __future__ import annotations

from conftest import main_json

from hangdbg.text.cuda_oom import held_elsewhere

NEW = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 2.12 MiB is "
       "free. Process 1234 has 40.00 GiB memory in use. Process 1235 has 39.10 GiB memory in use. Including non-PyTorch "
       "memory, this process has {own} memory in use.")
OLD = ("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB total capacity; {own} already allocated; "
       "18.06 MiB free; {own} reserved in total by PyTorch)")


def test_a_full_gpu_this_process_barely_uses_is_held_by_others():
    said = held_elsewhere(NEW.format(own="38.00 MiB"))
    assert "held by other processes (2 other processes listed)" in said and "38.00 MiB" in said
    assert "held by other processes" in held_elsewhere(OLD.format(own="0 bytes"))


def test_a_full_gpu_this_process_fills_is_its_own():
    assert held_elsewhere(NEW.format(own="78.90 GiB")) == ""
    assert held_elsewhere(OLD.format(own="22.00 GiB")) == ""
    assert held_elsewhere("CUDA out of memory.") == ""


def test_the_finding_says_whose_memory_it_is(tmp_path):
    (tmp_path / "r.log").write_text("[rank1]: torch.OutOfMemoryError: " + NEW.format(own="38.00 MiB") + "\n")
    code, doc = main_json("report", str(tmp_path))
    top = doc["findings"][0]
    assert code == 3 and "held by other processes" in top["summary"] and top["ranks"] == [1]
