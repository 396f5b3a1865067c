"""Options of the reliability suite: --long runs the full-size variants once."""


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run the long reliability variants (32 clients x 500 cycles on 1 M parameters, "
                          "100,000 fuzzed frames)")
