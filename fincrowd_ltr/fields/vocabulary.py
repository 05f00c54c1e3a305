"""The documented vocabularies of the field extractor.

Each vocabulary maps a canonical value to the surface forms (regular expressions, matched on
lower-cased text at word boundaries) that express it. Changing a vocabulary changes what the
extractor sees: bump ``EXTRACTOR_VERSION`` so checkpoints record which vocabulary they used.
"""

from __future__ import annotations

EXTRACTOR_VERSION = "1.5"

# Financial metrics: canonical name -> surface forms. Forms are specific enough that a
# passage which mentions them is about that metric (e.g. the cash-flow line item for capex).
# fmt: off
METRICS: dict[str, list[str]] = {
    "revenue": [r"(?<!deferred )(?<!unearned )revenues?", r"net sales", r"total sales",
                r"net revenues?", r"top[- ]?line",
                # bare "sales", but not cost of sales, sales and marketing, sales tax, asset sales
                r"(?<!cost of )(?<!costs of )(?<!selling and )sales(?! (?:and|&) marketing"
                r"| tax| representatives?| force| of (?:property|assets?|investments?|securities"
                r"|businesses|subsidiar))"],
    "cost_of_revenue": [r"costs? of (?:goods sold|sales|(?:\w+ )?revenues?|products sold)", r"cogs"],
    "gross_profit": [r"gross (?:profit|margin)s?"],
    "operating_income": [r"(?<!net )operating (?:income|profits?|loss)", r"income from operations",
                         r"operating earnings", r"ebit(?!da)"],
    "operating_margin": [r"operating margins?", r"operating (?:income|profit) (?:% |percent )?margins?"],
    "net_income": [r"net (?:income|earnings|loss|profit)", r"profit attributable",
                   r"net income attributable"],
    "eps": [r"earnings per (?:common )?share", r"eps",
            r"(?:net )?(?:income|earnings) \(loss\) per (?:common |diluted |basic )?share",
            r"(?:diluted|basic) (?:net )?(?:income|earnings) per share", r"net income per share"],
    "ebitda": [r"ebitda"],
    "capital_expenditure": [r"capital expenditures?", r"capex",
                            r"purchases? of property,? (?:plant,? )?(?:and )?equipment",
                            r"(?:additions|payments) (?:to|for) property,? plant,? and equipment",
                            r"purchases of pp&e"],
    "operating_cash_flow": [r"cash (?:flows? )?(?:provided by|from|generated (?:by|from)) operat\w*",
                            r"operations, investing,? and financing",
                            r"operating cash flows?", r"cash flows? from operating activities",
                            r"net cash (?:provided by|from) operating activities"],
    "free_cash_flow": [r"free cash ?flows?", r"fcf"],
    "dividends": [r"dividends?(?: paid| per share| declared)?", r"payout ratio"],
    "share_repurchase": [r"(?:stock|share) repurchases?", r"(?:stock|share) buybacks?",
                         r"repurchases? of (?:our )?(?:common )?(?:stock|shares)", r"treasury stock"],
    "total_assets": [r"total assets", r"return on (?:total )?assets", r"(?<!fixed )asset turnover"],
    "total_liabilities": [r"total liabilities"],
    "shareholders_equity": [r"(?:total )?(?:common )?(?:stock|share)holders['’]? equity", r"total equity",
                            r"return on equity"],
    # debt held as an investment (investments in debt, debt investments) is not the company's debt
    "debt": [r"(?<!investments in )(?<!available-for-sale )(?<!marketable )(?<!held-to-maturity )"
             r"(?:total |long[- ]term |short[- ]term )?debt(?! investments?| (?:securities|instruments)"
             r" held)", r"borrowings?", r"notes payable",
             r"leverage ratio", r"credit (?:agreements?|facilit(?:y|ies))", r"loans? payable",
             r"\(loan\)"],
    "cash": [r"cash (?:and|&) cash equivalents", r"cash balance"],
    "inventory": [r"inventor(?:y|ies)", r"days inventory outstanding"],
    "accounts_receivable": [r"accounts receivables?", r"trade receivables?", r"receivables balance",
                            r"current receivables", r"days sales outstanding"],
    "accounts_payable": [r"accounts payables?", r"days payable outstanding"],
    "working_capital": [r"working capital", r"current ratio", r"quick ratio",
                        r"total current (?:assets|liabilities)"],
    "depreciation_amortization": [r"depreciation(?: and amortization)?", r"amortization", r"d&a"],
    "interest_expense": [r"interest expense", r"interest costs?", r"finance costs?",
                         r"interest coverage"],
    "income_tax": [r"(?:income )?tax (?:expense|provision|rate)", r"effective tax rate",
                   r"provision for(?:/| )?(?:\(benefit from\) )?income taxes", r"income tax benefits?"],
    "research_development": [r"research(?:,| and) development", r"r&d", r"rd&e"],
    "sga": [r"selling,? general,? and administrative", r"sg&a"],
    "goodwill": [r"goodwill", r"impairment (?:charges?|loss(?:es)?)"],
    "restructuring": [r"restructuring"],
    "employees": [r"number of employees", r"headcount", r"employee count"],
}

# Segment vocabulary: generic geographic and business segment names; company-specific names
# are caught by the "<name> segment" pattern in the extractor.
SEGMENTS: dict[str, list[str]] = {
    "americas": [r"americas"],
    "north_america": [r"north america(?:n)?"],
    "latin_america": [r"latin america"],
    "united_states": [r"(?<!of the )united states(?! (?:district|government|code|securities))",
                      r"domestic(?: segment| market)?",
                      r"u\.s\.(?= (?:segment|operations|markets?|sales|revenues?))"],
    "international": [r"international (?:segment|operations|markets?|sales|revenues?)"],
    "europe": [r"europe", r"emea"],
    "asia_pacific": [r"asia[- ]pacific", r"apac", r"apj"],
    "china": [r"greater china", r"china"],
    "japan": [r"japan"],
    "consumer": [r"consumer"],
    "enterprise": [r"enterprise"],
    "data_center": [r"data center"],
    "gaming": [r"gaming"],
    "healthcare": [r"health ?care"],
    "industrial": [r"industrial"],
    "services": [r"services segment", r"service revenue"],
    "products": [r"products? segment", r"product revenue"],
}

# Table scope: the financial statement (or note) a table belongs to.
STATEMENTS: dict[str, list[str]] = {
    "income_statement": [
        r"income statements?",
        r"statements? of (?:consolidated )?(?:income|operations|earnings)",
        r"p&l",
        r"profit and loss",
    ],
    "balance_sheet": [
        r"(?<!off-)(?<!off )(?<!on-)balance sheets?",
        r"statements? of (?:consolidated )?financial (?:position|condition)",
    ],
    "cash_flow_statement": [
        r"cash flows? statements?",
        r"statements? of (?:consolidated )?cash flows?",
    ],
    "equity_statement": [
        r"statements? of (?:consolidated )?(?:changes in )?(?:share|stock)holders['’]? (?:\(deficit\) )?equity",
        r"statements? of (?:consolidated )?(?:changes in )?(?:total )?equity",
    ],
    "segment_note": [
        r"segment information",
        r"segment reporting",
        r"reportable segments?",
        r"reporting segments?",
        r"segment results",
    ],
}

# Units: magnitudes and kinds of quantity, as stated in headers and questions.
# ("($ million)", "(in $ millions)", "($ in thousands)": magnitude headers written with the symbol)
UNITS: dict[str, list[str]] = {
    "thousands": [r"in thousands", r"\(thousands\)", r"thousands of (?:u\.s\. )?dollars",
                  r"usd thousands", r"\(in \$? ?thousands", r"\(\$ ?(?:in )?thousands?\)",
                  r"in (?:us\$|\$|usd) ?thousands?"],
    "millions": [r"in millions", r"\(millions\)", r"usd millions", r"millions of (?:u\.s\. )?dollars",
                 r"\(in \$? ?millions", r"\(\$ ?(?:in )?millions?\)", r"dollars in millions", r"usdm",
                 r"in (?:us\$|\$|usd) ?millions?"],
    "billions": [r"in billions", r"\(billions\)", r"usd billions", r"billions of (?:u\.s\. )?dollars",
                 r"\(in \$? ?billions", r"\(\$ ?(?:in )?billions?\)", r"in (?:us\$|\$|usd) ?billions?"],
    "percent": [r"percent(?:age)?s?", r"per cent", r"margins?", r"(?:tax|growth|discount) rates?"],
    "per_share": [r"per (?:diluted |common |basic )?share"],
}

# Amounts written with a magnitude word ("$72.3 million") and symbols that touch digits; these
# are matched without word boundaries.
MAGNITUDE_AMOUNTS: dict[str, list[str]] = {
    "thousands": [r"\d thousand\b", r"\$ ?'000"],
    "millions": [r"\d ?(?:million|mn)\b", r"\$ ?m\b"],
    "billions": [r"\d ?(?:billion|bn)\b", r"\$ ?bn?\b"],
    "percent": [r"%"],
}

# Currencies. Symbols are matched without word boundaries (they touch the amount: "$2.7");
# a bare "$" means USD.
CURRENCIES: dict[str, list[str]] = {
    "USD": [r"usd(?:m|bn)?", r"us\$", r"u\.s\. dollars?"],
    "EUR": [r"eur", r"euros?"],
    "GBP": [r"gbp", r"pounds? sterling"],
    "JPY": [r"jpy", r"yen"],
    "CNY": [r"cny", r"rmb", r"renminbi"],
    "CAD": [r"cad", r"c\$", r"canadian dollars?"],
    "AUD": [r"aud", r"a\$", r"australian dollars?"],
    "CHF": [r"chf", r"swiss francs?"],
    "INR": [r"inr", r"rupees?"],
    "DKK": [r"dkk", r"danish kroner"],
}
CURRENCY_SYMBOLS: dict[str, str] = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}

# Corpus metadata adds more at run time (FieldExtractor.from_passages).
COMPANIES: dict[str, list[str]] = {
    "3M": ["3m", "mmm", "3m company", "minnesota mining"],
    "AES Corporation": ["aes", "aes corp", "the aes corporation"],
    "AMD": ["amd", "advanced micro devices"],
    "Activision Blizzard": ["activision", "activision blizzard", "atvi", "blizzard"],
    "Adobe": ["adobe", "adbe"],
    "Amazon": ["amazon", "amzn", "amazon.com"],
    "Amcor": ["amcor", "amcr"],
    "American Express": ["american express", "amex", "axp"],
    "American Water Works": ["american water works", "american water", "awk"],
    "Apple": ["apple", "aapl"],
    "Best Buy": ["best buy", "bby"],
    "Block": ["block", "block inc", "square", "sq"],
    "Boeing": ["boeing", "ba"],
    "CVS Health": ["cvs", "cvs health"],
    "Coca-Cola": ["coca-cola", "coca cola", "coke", "ko"],
    "Corning": ["corning", "glw"],
    "Costco": ["costco"],
    "FedEx": ["fedex", "fdx", "federal express"],
    "Foot Locker": ["foot locker", "footlocker", "fl"],
    "General Mills": ["general mills", "gis"],
    "Intel": ["intel", "intc"],
    "JPMorgan": ["jpmorgan", "jp morgan", "jpmorgan chase", "jpm"],
    "Johnson & Johnson": ["johnson & johnson", "johnson and johnson", "j&j", "jnj"],
    "Kraft Heinz": ["kraft heinz", "kraft", "khc"],
    "Lockheed Martin": ["lockheed martin", "lockheed", "lmt"],
    "MGM Resorts": ["mgm resorts", "mgm", "mgm resorts international"],
    "McDonalds": ["mcdonalds", "mcdonald's", "mcd"],
    "Microsoft": ["microsoft", "msft"],
    "Netflix": ["netflix", "nflx"],
    "Nike": ["nike", "nke"],
    "Oracle": ["oracle", "orcl"],
    "PG&E Corporation": ["pg&e", "pacific gas and electric", "pcg"],
    "Paypal": ["paypal", "pypl"],
    "PepsiCo": ["pepsico", "pepsi", "pep"],
    "Pfizer": ["pfizer", "pfe"],
    "Salesforce": ["salesforce", "crm", "salesforce.com"],
    "Ulta Beauty": ["ulta beauty", "ulta", "ulta salon"],
    "Verizon": ["verizon", "vz"],
    "Walmart": ["walmart", "wal-mart", "wmt"],
    "eBay": ["ebay"],
    "Alphabet": ["alphabet", "google", "googl"],
    "Meta": ["meta platforms", "facebook", "meta"],
    "Tesla": ["tesla", "tsla"],
    "Nvidia": ["nvidia", "nvda"],
    "Netapp": ["netapp", "ntap"],
    "Berkshire Hathaway": ["berkshire hathaway", "berkshire", "brk.a", "brk.b"],
    "Coupang": ["coupang", "cpng"],
    "Delta Air Lines": ["delta air lines", "delta", "dal"],
    "Home Depot": ["home depot", "hd"],
    "Linde": ["linde", "lin"],
    "Procter & Gamble": ["procter & gamble", "procter and gamble", "p&g", "pg"],
    "UnitedHealth": ["unitedhealth", "unitedhealth group", "unh"],
    "Visa": ["visa", "v"],
}

# Short or common-word aliases (tickers that are also English words) must match in their
# original case only; these are checked case-sensitively, in upper case, as whole words.
CASE_SENSITIVE_ALIASES = {
    "ba",
    "ko",
    "fl",
    "sq",
    "v",
    "pg",
    "hd",
    "lin",
    "dal",
    "crm",
    "mmm",
    "gis",
    "pep",
    "block",
    "visa",
    "delta",
    "meta",
    "kraft",
    "square",
    "coke",
    "cvs",
    "aes",
    "mgm",
    "amd",
    "intel",
    "oracle",
    "apple",
}
