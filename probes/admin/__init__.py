"""The operator's console (Django admin): the catalog's rows and their forms, the
add-endpoint page, the operator actions (run now, test connection) and the capacity
columns. The top of the house: it may import every other probes package, none imports it
(the layers contract in pyproject.toml).

Django's admin autodiscovery imports ``probes.admin``: importing the console here is what
registers the ModelAdmins.
"""

from probes.admin import console, maintenance, measured  # noqa: F401 - registers the ModelAdmins
