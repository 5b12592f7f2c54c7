# python/module.mk - the Python package's test environment; included by the top Makefile.
# `make test` needs a virtual environment with pytest (build/python-venv, made once; pip fetches
# pytest) in which tests/cases/python*.sh run python/tests against the built libraries.
PY_VENV := $(BUILD)/python-venv
PY_VENV_OK := $(PY_VENV)/.ok

$(PY_VENV_OK): python/module.mk | $(DEPS_STAMP)
	@rm -rf $(PY_VENV)
	$(call Q,VENV)python3 -m venv $(PY_VENV)
	@$(PY_VENV)/bin/python -m pip install -q --disable-pip-version-check 'pytest>=7' \
	  || { echo "python/module.mk: cannot install pytest into $(PY_VENV) (no network?)"; exit 1; }
	@touch $@

python-venv: $(PY_VENV_OK)
test: $(PY_VENV_OK)
.PHONY: python-venv
