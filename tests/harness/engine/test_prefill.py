"""harness.engine.prefill: a batch's prompt cache, computed once and continued by copies,
gives what a pass without it gives; a copy is private and repeats rows as settings do."""

from __future__ import annotations

import pytest
import torch

from attentionspan_datasets import iter_instances
from harness.engine.inference import collate_left, generate_batch, teacher_forced_batch
from harness.engine.prefill import cache_copy, prompt_prefix_cache
from harness.foundation.data import PromptConfig
from harness.foundation.models import load_model
from harness.foundation.tokenization import CharTokenizer


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def loaded(request, tiny_model_dirs):
    model, tokenizer = load_model(str(tiny_model_dirs[request.param]))
    model.eval()
    char_tok = CharTokenizer(tokenizer)
    instances = list(iter_instances("string_reversal", stop=6, max_length=20))
    prompt = PromptConfig(instruction="Reverse the string.")
    return model, char_tok, [prompt.encode(char_tok, x) for x in instances]


def test_a_copy_of_the_prefix_gives_the_passes_without_it(loaded):
    model, char_tok, encodings = loaded
    prompts = collate_left(encodings, char_tok.pad_id, with_answer=False)
    prefix = prompt_prefix_cache(model, prompts)
    assert prefix.get_seq_length() == prompts.prompt_width - 1
    whole = teacher_forced_batch(model, char_tok, encodings)
    for _ in range(2):  # the prefix itself is never extended: a second copy serves as well
        cached = teacher_forced_batch(model, char_tok, encodings, **cache_copy(model, prefix))
        assert cached.predicted == whole.predicted and cached.correct == whole.correct
    assert prefix.get_seq_length() == prompts.prompt_width - 1
    free = generate_batch(model, char_tok, encodings, max_new_tokens=8)
    reused = generate_batch(
        model, char_tok, encodings, max_new_tokens=8, **cache_copy(model, prefix)
    )
    assert reused.ids == free.ids


def test_a_repeated_copy_serves_each_row_once_per_setting(loaded):
    model, char_tok, encodings = loaded
    prompts = collate_left(encodings, char_tok.pad_id, with_answer=False)
    prefix = prompt_prefix_cache(model, prompts)
    rows = [enc for enc in encodings for _ in range(3)]  # instance-major, as settings' rows
    whole = teacher_forced_batch(model, char_tok, rows)
    cached = teacher_forced_batch(model, char_tok, rows, **cache_copy(model, prefix, 3))
    assert cached.predicted == whole.predicted
    assert torch.equal(cached.batch.input_ids, whole.batch.input_ids)


def test_setting_groups_run_every_setting_once_on_the_shared_prefill(loaded):
    """Five settings in groups of two: three groups (2, 2, 1), each a generation and a
    teacher-forced pass over the instances x its settings, continuing the shared prefill,
    with what passes without it give; the plan of each group is asked for once."""
    from harness.engine.capture import AttentionPlan
    from harness.engine.prefill import setting_groups
    from harness.engine.scoring import Scorer

    model, char_tok, encodings = loaded
    scorer = Scorer(model, char_tok)
    asked = []

    def plan_of(members):
        asked.append(list(members))
        return AttentionPlan()

    groups = list(setting_groups(scorer, encodings, 5, plan_of, per_group=2))
    assert asked == [g.members for g in groups] == [[0, 1], [2, 3], [4]]
    free = generate_batch(
        model, char_tok, encodings, max_new_tokens=max(e.target_len for e in encodings) + 1
    )
    whole = teacher_forced_batch(model, char_tok, encodings)
    for group in groups:
        for b in range(len(encodings)):
            for s in range(len(group.members)):
                row = group.row(b, s)
                assert group.generation.ids[row] == free.ids[b]
                assert group.forced.predicted[row] == whole.predicted[b]
    only_forced = list(setting_groups(scorer, encodings, 1, plan_of, per_group=4, generate=False))
    assert only_forced[0].generation is None and only_forced[0].forced is not None
    with pytest.raises(ValueError, match="needs a pass"):
        setting_groups(
            scorer, encodings, 1, plan_of, per_group=1, generate=False, teacher_forced=False
        )
