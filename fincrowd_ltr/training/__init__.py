"""Lightning wrappers that train the correction (the math lives in ``fincrowd_ltr.model``)."""
