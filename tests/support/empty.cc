// keeps floe_test_support non-empty
