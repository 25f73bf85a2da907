# SPDX-License-Identifier: GPL-2.0-only
"""Exit codes and the error every command reports."""


EX_OK, EX_FAIL, EX_USAGE, EX_NOENT, EX_NOTTC, EX_PERM, EX_BUSY = 0, 1, 2, 3, 4, 5, 6


class Fail(Exception):
    def __init__(self, msg, code=EX_FAIL):
        super().__init__(msg)
        self.code = code
