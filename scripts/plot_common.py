"""What the plotting scripts share: one-line errors with exit code 2, and matplotlib's Agg backend
(with Debian's python3-matplotlib found from a pyenv or virtualenv python3 too)."""

import os
import sys


def fail(program, message):
    print(f"{program}: error: {message}", file=sys.stderr)
    sys.exit(2)


def import_pyplot(program):
    try:
        import matplotlib
    except ImportError:
        # A pyenv/virtualenv python3 does not see Debian's python3-matplotlib; try its directory.
        debian = "/usr/lib/python3/dist-packages"
        if os.path.isdir(debian) and debian not in sys.path:
            sys.path.append(debian)
        try:
            import matplotlib
        except ImportError:
            fail(program, "matplotlib is not installed (apt-get install python3-matplotlib, then "
                 "run with /usr/bin/python3)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
