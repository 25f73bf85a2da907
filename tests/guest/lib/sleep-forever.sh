#!/bin/bash
# Runner self-test: never finish, so the runner's timeout must fire.
echo "sleeping until killed"
sleep infinity
