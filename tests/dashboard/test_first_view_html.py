"""The first view written into a page (dashboard/first_view.py `script`): data the HTML parser
cannot end or comment out, read back by JSON.parse as the API sent it."""

from __future__ import annotations

import json
import re

from tallyboard.dashboard.first_view import script

HOSTILE = "</script><script>alert(1)</script><!-- & \u2028\u2029 </SCRIPT >"


def test_stored_text_cannot_end_the_element_and_reads_back_unchanged():
    answer = json.dumps({"rows": [{"name": HOSTILE, "cells": {HOSTILE: 1}}]})
    html = script({"/api/runs?q=%3C": answer, "/api/alerts": "{}"})
    found = re.fullmatch(r'<script type="application/json" id="first-view">(.*)</script>', html, re.S)
    assert found is not None
    inner = found[1]
    assert not set("<>&\u2028\u2029") & set(inner)  # each is a JSON escape inside the element
    assert json.loads(inner) == {"/api/runs?q=%3C": json.loads(answer), "/api/alerts": {}}


def test_no_answers_no_element():
    assert script({}) == ""
