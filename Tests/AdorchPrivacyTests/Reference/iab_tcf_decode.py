"""Decodes TC strings with PyPI's iab-tcf, the differential test's independent decoder.

Reads one TC string a line from the file named as the first argument and prints one JSON
object a line: the fields iab-tcf decoded, vendor and purpose sets as sorted [start, end] runs,
so the Swift side compares sets without either side expanding large ranges.
"""
import calendar
import json
import sys

import iab_tcf


def runs(ids):
    """Sorted, merged [start, end] runs of an iterable of ids."""
    out = []
    for i in sorted(set(ids)):
        if out and i <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], i)
        else:
            out.append([i, i])
    return out


def merged(ranges):
    """Sorted, merged [start, end] runs of (start, end) ranges, without expanding them."""
    out = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def flags(bitfield):
    return runs(i for i, on in bitfield.items() if on)


def vendors(max_id, is_range, ranges, bitfield):
    return {
        "max": max_id,
        "range": bool(is_range),
        "ids": merged(ranges) if is_range else flags(bitfield),
    }


def seconds(moment):
    # iab-tcf returns a naive UTC datetime, truncated to the second.
    return calendar.timegm(moment.utctimetuple())


def decode(text):
    c = iab_tcf.decode(text)
    out = {
        "version": c.version,
        "created": seconds(c.created),
        "lastUpdated": seconds(c.last_updated),
        "cmpId": c.cmp_id,
        "cmpVersion": c.cmp_version,
        "consentScreen": c.consent_screen,
        "consentLanguage": c.consent_language.decode(),
        "vendorListVersion": c.vendor_list_version,
        "tcfPolicyVersion": c.tcf_policy_version,
        "isServiceSpecific": bool(c.is_service_specific),
        "useNonStandardTexts": bool(c.use_non_standard_stacks),
        "specialFeatureOptIns": flags(c.special_features_optin),
        "purposesConsent": flags(c.purposes_consent),
        "purposesLITransparency": flags(c.purposes_legitimate_interests),
        "purposeOneTreatment": bool(c.purpose_one_treatment),
        "publisherCC": c.publisher_cc.decode(),
        "vendorConsents": vendors(
            c.max_consent_vendor_id, c.is_consent_range_encoding,
            getattr(c, "consented_vendors_range", []), getattr(c, "consented_vendors", {})),
        "vendorLegitimateInterests": vendors(
            c.max_interests_vendor_id, c.is_interests_range_encoding,
            getattr(c, "interests_vendors_range", []), getattr(c, "interests_vendors", {})),
        "publisherRestrictions": [
            {"purposeId": r.purpose_id, "restrictionType": r.restriction_type, "ids": merged(r.restrictions_range)}
            for r in c.pub_restriction_entries
        ],
    }
    # The out-of-band segments come back as {id: bool} whichever encoding they used.
    if hasattr(c, "oob_disclosed_vendors"):
        out["disclosedVendors"] = flags(c.oob_disclosed_vendors)
    if hasattr(c, "oob_allowed_vendors"):
        out["allowedVendors"] = flags(c.oob_allowed_vendors)
    if hasattr(c, "publisher_tc"):
        tc = c.publisher_tc
        out["publisherTC"] = {
            "purposesConsent": flags(tc.purposes_consent),
            "purposesLITransparency": flags(tc.purposes_lit_transparency),
            "numCustomPurposes": len(tc.custom_purposes_consent),
            "customPurposesConsent": flags(tc.custom_purposes_consent),
            "customPurposesLITransparency": flags(tc.custom_purposes_lit_transparency),
        }
    return out


def main():
    with open(sys.argv[1], encoding="ascii") as lines:
        for line in lines:
            print(json.dumps(decode(line.strip()), separators=(",", ":")))


if __name__ == "__main__":
    main()
