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


def test_hashing_that_leaves_a_fold_empty_is_repaired_by_moving_whole_groups():
    from fincrowd_ltr.data.splits import FoldPlan

    # seven groups over five folds: find a seed whose hash assignment leaves a fold empty
    ds = make([g for g in "abcdefg" for _ in range(3)])
    seed = next(s for s in range(100) if any(not f for f in group_kfold(ds, 5, s)))
    hashed = group_kfold(ds, 5, seed)
    plan = FoldPlan.by_group(ds, 5, seed)
    assert all(plan.folds), "every fold holds questions"
    assert sorted(q for f in plan.folds for q in f) == sorted(ds.queries)
    for fold in plan.folds:  # groups still never straddle folds
        groups = {ds.queries[q].group for q in fold}
        assert all(ds.queries[q].group not in groups for f in plan.folds if f != fold for q in f)
    # a fold hashing had filled with one group only is never a donor
    donors = [i for i, f in enumerate(hashed) if f and set(plan.folds[i]) != set(f)]
    assert all(len({ds.queries[q].group for q in hashed[i]}) >= 2 for i in donors)
    # a plan without an empty fold is the hash assignment, untouched
    full = next(s for s in range(100) if all(group_kfold(ds, 3, s)))
    assert [list(f) for f in FoldPlan.by_group(ds, 3, full).folds] == group_kfold(ds, 3, full)
    # fewer groups than folds: as many folds filled as there are groups, no error here
    few = make(["a", "b"])
    assert sum(1 for f in FoldPlan.by_group(few, 4).folds if f) == 2


def test_held_units_name_a_fold_as_its_pages_and_synthetic_questions_do():
    """A BEIR question without a group is grouped by its answer's pages; training drawn from
    pages (synthetic questions, negatives) is grouped by company: a held-out fold must be left
    out under both names."""
    from fincrowd_ltr.data.schema import Dataset, Passage, Query
    from fincrowd_ltr.data.splits import held_units, page_unit

    passages = {
        "a1": Passage("a1", "Acme revenue", company="Acme", document="ACME_2021_10K"),
        "b1": Passage("b1", "Bolt revenue", document="BOLT_2021_10K"),  # no company: document
        "c1": Passage("c1", "Core revenue", company="Core"),
    }
    queries = {
        "qa": Query("qa", "Acme revenue?", group="a1"),  # grouped by its answer page
        "qb": Query("qb", "Bolt revenue?", group="b1", company="Bolt"),
        "qc": Query("qc", "Core revenue?", group="Core"),
    }
    qrels = {"qa": {"a1": 1}, "qb": {"b1": 1, "c1": 0}, "qc": {"c1": 1}}
    data = Dataset("d", queries, passages, qrels)
    assert page_unit(passages["b1"]) == "BOLT_2021_10K"
    assert held_units(data, ["qa"]) == {"a1", "Acme"}
    assert held_units(data, ["qb"]) == {"b1", "Bolt", "BOLT_2021_10K"}  # grade 0: not its page
    assert held_units(data, []) == set()
