"""lxml, an XML parser nobody here wrote, reads every custom policy this project ships for its
tests (Tests/interop/policies) and checks it against the rules the service enforces, as
`todo-server policies schema` prints them: the IEF namespace, each element's allowed children,
and the step types, handlers, protocols, transformations and data types it runs."""

import json
import os
import subprocess
from pathlib import Path

from lxml import etree

POLICIES = Path(__file__).parent / "policies"


def schema():
    result = subprocess.run([os.environ["TODO_SERVER_BIN"], "policies", "schema"], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(result.stdout)


def test_every_shipped_policy_follows_the_supported_schema():
    rules = schema()
    namespace = rules["namespace"]
    parser = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True)
    files = sorted(POLICIES.rglob("*.xml"))
    assert len(files) >= 5
    for file in files:
        root = etree.parse(str(file), parser).getroot()
        assert root.tag == f"{{{namespace}}}TrustFrameworkPolicy", file
        for element in root.iter(etree.Element):
            name = etree.QName(element).localname
            assert etree.QName(element).namespace == namespace, (file, name)
            allowed = rules["children"].get(name)
            for child in element:
                child_name = etree.QName(child).localname
                assert allowed is None or child_name in allowed, f"{file.name}: {child_name} in {name}"
            if name == "OrchestrationStep":
                assert element.get("Type") in rules["stepTypes"], (file.name, element.get("Type"))
            if name == "Protocol" and element.getparent() is not None and etree.QName(element.getparent()).localname == "TechnicalProfile":
                assert element.get("Name") in rules["protocols"], (file.name, element.get("Name"))
                if element.get("Name") == "Proprietary":
                    handler = element.get("Handler").split(",")[0].split(".")[-1]
                    assert handler in rules["handlers"], (file.name, handler)
            if name == "ClaimsTransformation":
                assert element.get("TransformationMethod") in rules["transformations"], (file.name, element.get("TransformationMethod"))
            if name == "DataType":
                assert element.text in rules["dataTypes"], (file.name, element.text)


def test_the_schema_refuses_what_lxml_finds_outside_it():
    """The check above can fail: an element the service does not run is outside the printed rules."""
    rules = schema()
    assert "DisplayControls" not in rules["children"]["BuildingBlocks"]
    assert "RESTful" not in rules["protocols"] and "UserDialog" not in rules["stepTypes"]
    assert "InvokeSubJourney" in rules["stepTypes"] and "SubJourneys" in rules["children"]["TrustFrameworkPolicy"]
