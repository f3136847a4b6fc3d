"""Reading a host's text files in the collection's probe modules: a file that cannot be read
is None (absent, unreadable or a folder), bytes that are not UTF-8 are replaced."""


def read_text(path: str):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None
