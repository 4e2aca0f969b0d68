# pytester must be enabled from the rootdir conftest (pytest only reads pytest_plugins here).
pytest_plugins = ["pytester"]
