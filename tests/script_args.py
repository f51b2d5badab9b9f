"""Command lines of the test scripts: <include-dir>... -- <compiler and flags...> -- <files...>"""


def split_arguments(args):
    first = args.index("--")
    second = args.index("--", first + 1)
    return args[:first], args[first + 1:second], args[second + 1:]
