from fincrowd_ltr.data.schema import Dataset, Query
from fincrowd_ltr.data.splits import fold_split, group_fold, group_kfold


def make(groups):
    queries = {f"q{i}": Query(f"q{i}", "text", group=g) for i, g in enumerate(groups)}
    return Dataset("toy", queries, {}, {})


def test_groups_never_straddle_and_assignment_is_stable():
    ds = make(["a", "a", "b", "c", "c", "d", "e", "f", "g", "h"])
    folds = group_kfold(ds, k=3)
    assert sorted(q for f in folds for q in f) == sorted(ds.queries)
    for fold in folds:
        groups = {ds.queries[q].group for q in fold}
        others = {ds.queries[q].group for f in folds if f is not fold for q in f}
        assert not groups & others
    # adding a new group does not move the old ones
    bigger = make(["a", "a", "b", "c", "c", "d", "e", "f", "g", "h", "new"])
    fold_of = {q: i for i, fold in enumerate(folds) for q in fold}
    fold_of_bigger = {q: i for i, fold in enumerate(group_kfold(bigger, 3)) for q in fold}
    assert all(fold_of[q] == fold_of_bigger[q] for q in ds.queries)
    assert fold_of_bigger["q10"] == group_fold("new", 3)
    # another seed is another assignment (the seed is not ignored)
    assert any(group_fold(g, 3, seed=1) != group_fold(g, 3) for g in "abcdefgh")


def test_fold_split_parts_are_disjoint_and_complete():
    ds = make([str(i % 7) for i in range(40)])
    parts = fold_split(ds, test_fold=0, k=5)
    all_ids = parts["train"] + parts["val"] + parts["test"]
    assert sorted(all_ids) == sorted(ds.queries)
    groups = {k: {ds.queries[q].group for q in v} for k, v in parts.items()}
    assert not groups["train"] & groups["test"] and not groups["val"] & groups["test"]
