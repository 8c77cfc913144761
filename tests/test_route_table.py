"""The table of which kernel serves which shape (kernels/attention/dispatch.py's docstring) is the
one SHAPE_RULES make: a rule that changes without the table fails here."""
from kernels.attention import dispatch, route_table


def test_the_dispatch_docstring_holds_the_table_the_rules_make():
    assert route_table.table() in dispatch.__doc__, (
        "kernels/attention/dispatch.py's table is stale: paste `python -m kernels.attention.route_table` into its docstring")


def test_the_table_has_a_row_per_rule_and_routes_each_row_as_the_rules_do():
    rows = route_table.rows()
    assert len(rows) == len(dispatch.SHAPE_RULES) + 1
    for rule, (_, path, version, kernel) in zip(dispatch.SHAPE_RULES, rows):
        n = rule.min_len if rule.max_len is None else rule.max_len
        d = rule.head_dim if rule.head_sizes is None else rule.head_sizes[0]  # a head size the rule takes
        want_path, config = dispatch.rule_route(dispatch.SHAPE_RULES, d, rule.causal, n)
        assert (path, version) == (want_path, (config or {}).get("version", "-"))
        # the kernel function lives in the path's own module (the Gluon path's tile kernel in gluon_tile.py)
        assert kernel.split(".")[0] in ({path, "gluon_tile"} if path == "gluon" else {path})
    assert rows[-1][1] == dispatch.AUTO_ORDER[0]


def test_a_rule_for_part_of_a_tile_is_printed_with_its_head_sizes_and_leaves_the_rest_to_the_next_rule():
    rules = {row[0]: row[2] for row in route_table.rows()}
    assert rules["d 72-96, non-causal, any N"] == "g27" and rules["d 104-128, non-causal, any N"] == "g15"
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 96, False, 4096)[1] == {"version": "g27"}
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 104, False, 4096)[1] == {"version": "g15"}
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 128, True, 4096)[1] == {"version": "g27"}
