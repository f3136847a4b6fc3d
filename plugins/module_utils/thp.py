"""Transparent huge pages as the kernel shows them: each of THP_DIR's enabled and defrag files
lists the modes with the selected one in brackets ("always [madvise] never"), read the same way
by hostcheck's memory check and the sysctl_tuning role's probe. This file is shared: the
collection ships it as module_utils and the hostcheck package as hostcheck._shared
(pyproject.toml), so it uses the standard library only."""

THP_DIR = "/sys/kernel/mm/transparent_hugepage"


def parse_bracketed(text):
    """'always [madvise] never' -> ('madvise', ['always', 'madvise', 'never']): the first word
    in brackets is the selected one (None when no word is), every word an option."""
    selected = None
    options = []
    for word in text.split():
        if len(word) > 2 and word.startswith("[") and word.endswith("]"):
            word = word[1:-1]
            if selected is None:
                selected = word
        options.append(word)
    return selected, options
