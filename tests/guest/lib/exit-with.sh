#!/bin/bash
# Runner self-test: exit with the status given as $1.
exit "$1"
