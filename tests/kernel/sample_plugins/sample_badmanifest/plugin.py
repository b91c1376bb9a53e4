raise AssertionError("a plugin with a bad manifest must never be imported")
